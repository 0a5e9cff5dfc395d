// One CTA of CUDA threads on the host: its threads (up to 1024) run as user-level fibers
// (ucontext) in one OS thread until each is done; block and warp barriers, warp shuffles,
// warp-collective deposits (ldmatrix, mma: warp_gather) and per-thread cp.async groups
// (a copy lands when its thread waits for its group) are emulated. A deadlock (a warp
// split between a warp step and a block barrier) throws. No CUDA vocabulary here: the
// kernel emulators built on it add that (cta_emulator.hpp) or their own ops
// (prefill_attention_emulator.hpp).
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace memra::cuda_emu {

class Cta {
 public:
  static constexpr int kMaxThreads = 1024;

  Cta() : stacks_(new char[static_cast<size_t>(kMaxThreads) * kStack]) {}  // untouched until a fiber runs on it

  // Runs body() on `threads` threads (a multiple of 32) of one CTA to completion.
  template <class Body>
  void run(int threads, Body body);

  int tid() const { return cur_; }
  int threads() const { return threads_; }
  void block_barrier() { yield(kBlock); }
  // Block barriers completed since run() began (race checks compare against it).
  uint64_t block_generation() const { return block_gen_; }
  void warp_barrier() { yield(kWarp); }
  float shfl_xor(float v, int offset) {
    xchg_[cur_] = v;
    yield(kWarp);
    const float r = xchg_[cur_ ^ offset];
    yield(kWarp);
    return r;
  }
  // Every lane of the warp deposits `mine`; each then reads the warp's 32 deposits (a
  // warp-collective step: ldmatrix, mma).
  template <class T>
  void warp_gather(const T& mine, T* all) {
    static_assert(sizeof(T) <= kSlot, "deposit too large");
    std::memcpy(slot_[cur_], &mine, sizeof(T));
    yield(kWarp);
    const int base = cur_ & ~31;
    for (int l = 0; l < 32; ++l) std::memcpy(&all[l], slot_[base + l], sizeof(T));
    yield(kWarp);
  }
  void cp_async(void* dst, const void* src, int bytes) { pending_[cur_].push_back(Copy{dst, src, bytes}); }
  void commit() {
    groups_[cur_].push_back(std::move(pending_[cur_]));
    pending_[cur_].clear();
  }
  void wait_groups(int keep) {  // all but the `keep` newest committed groups land
    auto& g = groups_[cur_];
    while (static_cast<int>(g.size()) > keep) {
      for (const Copy& c : g.front()) {
        if (c.bytes) std::memcpy(c.dst, c.src, 16);
        else std::memset(c.dst, 0, 16);
      }
      g.erase(g.begin());
    }
  }

 private:
  static constexpr size_t kStack = 256 * 1024;  // per fiber (the prefill body's ops need more than 64 KB)
  static constexpr size_t kSlot = 64;
  enum State { kRunnable, kBlock, kWarp, kDone };
  struct Copy {
    void* dst;
    const void* src;
    int bytes;
  };
  void yield(State s) {
    state_[cur_] = s;
    swapcontext(&ctx_[cur_], &main_);
  }
  static void entry();
  void run_all();  // the fibers of run(), until every one is done

  std::unique_ptr<char[]> stacks_;
  ucontext_t main_{}, ctx_[kMaxThreads]{};
  State state_[kMaxThreads]{};
  float xchg_[kMaxThreads]{};
  alignas(16) unsigned char slot_[kMaxThreads][kSlot]{};
  std::vector<Copy> pending_[kMaxThreads];
  std::vector<std::vector<Copy>> groups_[kMaxThreads];
  int cur_ = 0, threads_ = 0;
  uint64_t block_gen_ = 0;
  void (*body_)(void*) = nullptr;
  void* arg_ = nullptr;
};

inline Cta* g_cta = nullptr;

inline void Cta::entry() {
  g_cta->body_(g_cta->arg_);
  g_cta->state_[g_cta->cur_] = kDone;  // uc_link returns to the scheduler
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"  // arg_ is used only while run() is on the stack
template <class Body>
void Cta::run(int threads, Body body) {
  if (threads <= 0 || threads > kMaxThreads || threads % 32 != 0) throw std::invalid_argument("CTA emulator: bad thread count");
  g_cta = this;
  threads_ = threads;
  block_gen_ = 0;
  body_ = [](void* b) { (*static_cast<Body*>(b))(); };
  arg_ = &body;
  run_all();
}
#pragma GCC diagnostic pop

inline void Cta::run_all() {
  for (int i = 0; i < threads_; ++i) {
    getcontext(&ctx_[i]);
    ctx_[i].uc_stack.ss_sp = stacks_.get() + static_cast<size_t>(i) * kStack;
    ctx_[i].uc_stack.ss_size = kStack;
    ctx_[i].uc_link = &main_;
    makecontext(&ctx_[i], &Cta::entry, 0);
    state_[i] = kRunnable;
    pending_[i].clear();
    groups_[i].clear();
  }
  for (;;) {
    bool ran = false;
    for (int i = 0; i < threads_; ++i)
      if (state_[i] == kRunnable) {
        cur_ = i;
        swapcontext(&main_, &ctx_[i]);
        ran = true;
      }
    int done = 0, at_block = 0;
    for (int i = 0; i < threads_; ++i) done += state_[i] == kDone, at_block += state_[i] == kBlock;
    if (done == threads_) return;
    bool released = false;
    if (at_block + done == threads_) {
      for (int i = 0; i < threads_; ++i)
        if (state_[i] == kBlock) state_[i] = kRunnable;
      ++block_gen_;
      released = true;
    } else {
      for (int w = 0; w < threads_ / 32; ++w) {
        int waiting = 0, live = 0;
        for (int l = 0; l < 32; ++l) {
          waiting += state_[w * 32 + l] == kWarp;
          live += state_[w * 32 + l] != kDone;
        }
        if (waiting > 0 && waiting == live) {
          for (int l = 0; l < 32; ++l)
            if (state_[w * 32 + l] == kWarp) state_[w * 32 + l] = kRunnable;
          released = true;
        }
      }
    }
    if (!ran && !released) throw std::runtime_error("CTA emulator: deadlock (a warp split between barriers)");
  }
}

// One CTA for every launch of the process (its fiber stacks allocated once; pages are touched
// only by the fibers that run).
inline Cta& process_cta() {
  static Cta* cta = new Cta;
  return *cta;
}

}  // namespace memra::cuda_emu

