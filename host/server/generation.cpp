#include "host/server/generation.hpp"

#include <algorithm>

#include "host/server/stop_matcher.hpp"

namespace memra::server {

struct GenerationRun::Choice {
  std::size_t index = 0;
  std::size_t group = 0;  // which prompt
  std::shared_ptr<engine::SequenceHandle> handle;
  tokenizer::StreamDecoder decoder;
  std::string text;            // everything decoded so far (stop strings included)
  std::size_t released = 0;    // bytes of `text` handed out
  std::vector<TokenRecord> tokens;
  std::size_t tokens_released = 0;
  std::int64_t generated = 0;
  std::int64_t cached = 0;
  std::int64_t cache_written = 0;
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
  bool done = false;
  bool got_first = false;
  std::chrono::steady_clock::time_point last_token;

  explicit Choice(std::shared_ptr<const tokenizer::Tokenizer> tok)
      : decoder(std::move(tok), {.skip_special_tokens = true, .clean_up_tokenization_spaces = {}}) {}
};

Result<std::unique_ptr<GenerationRun>> GenerationRun::start(ServedModel& model, const GenerationSpec& spec) {
  std::unique_ptr<GenerationRun> run(new GenerationRun);
  run->model_ = &model;
  run->spec_ = spec;
  run->start_ = std::chrono::steady_clock::now();
  std::vector<std::int32_t> stop_ids;
  if (!spec.ignore_eos) stop_ids = model.text.stop_ids;
  std::size_t index = 0;
  for (std::size_t g = 0; g < spec.prompts.size(); ++g) {
    for (std::int64_t j = 0; j < spec.n; ++j, ++index) {
      engine::SequenceRequest req;
      req.prompt = spec.prompts[g];
      req.sampling = spec.sampling;
      req.sampling.seed = spec.sampling.seed + index;
      req.max_tokens = spec.max_tokens;
      req.stop_ids = stop_ids;
      req.cache_namespace = spec.cache_namespace;
      req.priority = spec.priority;
      req.logit_bias = spec.logit_bias;
      req.constraint = spec.constraint;
      auto handle = model.scheduler->submit(std::move(req));
      if (!handle) return handle.error();  // the destructor cancels what was submitted
      auto c = std::make_unique<Choice>(model.text.tokenizer);
      c->index = index;
      c->group = g;
      c->handle = std::move(*handle);
      run->choices_.push_back(std::move(c));
    }
  }
  return run;
}

GenerationRun::~GenerationRun() { cancel(); }

GenerationRun::Admission GenerationRun::wait_admitted(std::chrono::milliseconds timeout,
                                                      const std::function<bool()>& client_gone) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& c : choices_) {
    while (!c->handle->wait_admitted(std::chrono::milliseconds(50))) {
      if (client_gone && client_gone()) {
        cancel();
        return Admission::client_gone;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        cancel();
        return Admission::timed_out;
      }
    }
  }
  return Admission::admitted;
}

void GenerationRun::cancel() {
  for (auto& c : choices_) {
    if (!c->done) {
      c->handle->cancel();
      c->done = true;
    }
  }
}

bool GenerationRun::done() const {
  return std::all_of(choices_.begin(), choices_.end(), [](const auto& c) { return c->done; });
}

std::int64_t GenerationRun::prompt_tokens() const {
  std::int64_t n = 0;
  for (const auto& p : spec_.prompts) n += static_cast<std::int64_t>(p.size());
  return n;
}

std::int64_t GenerationRun::completion_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : choices_) n += c->generated;
  return n;
}

std::int64_t GenerationRun::drafted_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : choices_) n += c->drafted;
  return n;
}

std::int64_t GenerationRun::accepted_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : choices_) n += c->accepted;
  return n;
}

std::int64_t GenerationRun::cache_written_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : choices_) n += c->cache_written;
  return n;
}

std::int64_t GenerationRun::cached_tokens() const {
  std::int64_t n = 0;
  for (const auto& c : choices_) {
    if (c->index % static_cast<std::size_t>(spec_.n) == 0) n += c->cached;
  }
  return n;
}

void GenerationRun::process(Choice& c, const engine::SequenceUpdate& u, std::chrono::steady_clock::time_point now,
                            ChoiceDelta& delta, bool& news) {
  c.cached = u.cached_tokens;
  c.cache_written = u.cache_written_tokens;
  c.drafted = u.drafted_tokens;
  c.accepted = u.accepted_tokens;
  if (!u.tokens.empty()) {
    if (!c.got_first) {
      c.got_first = true;
      if (on_first_token) on_first_token(std::chrono::duration<double>(now - start_).count());
      // Tokens delivered together with the first one reached the client with no gap.
      if (on_token_gap)
        for (std::size_t i = 1; i < u.tokens.size(); ++i) on_token_gap(0.0);
    } else if (on_token_gap) {
      const double gap = std::chrono::duration<double>(now - c.last_token).count() / static_cast<double>(u.tokens.size());
      for (std::size_t i = 0; i < u.tokens.size(); ++i) on_token_gap(gap);
    }
    c.last_token = now;
  }
  const auto& stop_ids = model_->text.stop_ids;
  for (const auto& t : u.tokens) {
    ++c.generated;
    const bool is_stop_id = !spec_.ignore_eos && std::find(stop_ids.begin(), stop_ids.end(), t.token) != stop_ids.end();
    const std::size_t start = c.text.size();
    c.text += c.decoder.push(t.token);
    // The end-of-text token itself is not part of the answer: no text, no logprob entry.
    if (!is_stop_id) c.tokens.push_back({t.token, t.logprob, t.top, start, c.text.size()});
  }

  std::optional<std::string> finish;
  std::size_t release_to = c.released;
  bool release_all_tokens = false;
  if (u.finish != engine::FinishReason::none) {
    c.text += c.decoder.finish();
    for (auto& tok : c.tokens) tok.text_end = std::min(tok.text_end, c.text.size());
    if (!c.tokens.empty()) c.tokens.back().text_end = c.text.size();  // the held-back tail belongs to the last token
  }
  const StopScan scan = scan_stops(c.text, c.released, spec_.stop);
  if (scan.stop_at) {
    // A stop string: the answer ends right before it; the sequence is stopped.
    release_to = *scan.stop_at;
    finish = "stop";
    for (const auto& s : spec_.stop) {
      if (c.text.compare(*scan.stop_at, s.size(), s) == 0) {
        delta.stop_sequence = s;
        break;
      }
    }
    c.handle->cancel();
    c.text.resize(*scan.stop_at);
    // Tokens that start inside the stop string are not part of the answer (released ones stay).
    auto first_cut = std::find_if(c.tokens.begin() + static_cast<std::ptrdiff_t>(c.tokens_released), c.tokens.end(),
                                  [&](const TokenRecord& tok) { return tok.text_start >= *scan.stop_at; });
    c.tokens.erase(first_cut, c.tokens.end());
    for (auto& tok : c.tokens) tok.text_end = std::min(tok.text_end, c.text.size());
    release_all_tokens = true;
  } else if (u.finish != engine::FinishReason::none) {
    release_to = c.text.size();
    release_all_tokens = true;
    switch (u.finish) {
      case engine::FinishReason::stop: finish = "stop"; break;
      case engine::FinishReason::length: finish = "length"; break;
      default:
        if (u.finish == engine::FinishReason::aborted) aborted_ = true;
        if (!error_) error_ = u.error.empty() ? std::string("the sequence was cancelled by the server") : u.error;
        finish = "error";
        break;
    }
  } else {
    release_to = scan.safe_end;
  }

  if (release_to > c.released) {
    delta.text = c.text.substr(c.released, release_to - c.released);
    c.released = release_to;
    news = true;
  }
  while (c.tokens_released < c.tokens.size() &&
         (release_all_tokens || c.tokens[c.tokens_released].text_end <= c.released)) {
    delta.tokens.push_back(c.tokens[c.tokens_released++]);
    news = true;
  }
  if (finish) {
    c.done = true;
    delta.finish_reason = std::move(finish);
    news = true;
  }
}

std::vector<ChoiceDelta> GenerationRun::poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceDelta> out;
  bool waited = false;
  engine::SequenceUpdate u;
  for (auto& c : choices_) {
    if (c->done) continue;
    // Block on the first unfinished choice only: one scheduler step feeds every
    // running sequence at once, so the others have their news by then.
    c->handle->wait(u, waited ? std::chrono::milliseconds(0) : timeout);
    waited = true;
    ChoiceDelta delta;
    delta.index = c->index;
    bool news = false;
    process(*c, u, std::chrono::steady_clock::now(), delta, news);
    if (news) out.push_back(std::move(delta));
  }
  return out;
}

}  // namespace memra::server
