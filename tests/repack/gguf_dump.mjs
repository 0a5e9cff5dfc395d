// Dumps a GGUF file's metadata and tensor infos as JSON, read by @huggingface/gguf
// (the independent reader the CheckpointGgufNode test compares memra against).
// usage: node gguf_dump.mjs <node_dir containing node_modules> <file.gguf>
// 64-bit integers are written as {"u64": "<decimal>"} so no precision is lost.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeDir, file] = process.argv.slice(2);
const mod = path.join(nodeDir, "node_modules", "@huggingface", "gguf", "dist", "index.mjs");
const { gguf } = await import(pathToFileURL(mod).href);
const r = await gguf(file, { allowLocalFile: true, typedMetadata: true });

const enc = (v) => {
  if (typeof v === "bigint") return { u64: v.toString() };
  if (Array.isArray(v)) return v.map(enc);
  if (typeof v === "number" && !Number.isFinite(v)) return { nonfinite: String(v) };
  return v;
};
const metadata = {};
for (const [k, tv] of Object.entries(r.typedMetadata)) {
  metadata[k] = { type: tv.type, subType: tv.subType ?? null, value: enc(tv.value) };
}
const tensors = r.tensorInfos.map((t) => ({
  name: t.name, n_dims: t.n_dims, shape: t.shape.map((x) => x.toString()), dtype: t.dtype, offset: t.offset.toString(),
}));
process.stdout.write(JSON.stringify({ metadata, tensors, tensorDataOffset: r.tensorDataOffset.toString() }));
