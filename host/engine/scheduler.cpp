#include "host/engine/scheduler.hpp"

#include <algorithm>

namespace memra::engine {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
    case FinishReason::aborted: return "aborted";
    default: return "none";
  }
}

bool SequenceHandle::wait(SequenceUpdate& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool news = cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || finish_ != FinishReason::none; });
  out.tokens.clear();
  out.tokens.swap(pending_);
  out.started = started_;
  out.finish = finish_;
  out.error = error_;
  out.prompt_tokens = prompt_tokens_;
  out.cached_tokens = cached_tokens_;
  out.cache_written_tokens = cache_written_tokens_;
  out.drafted_tokens = drafted_tokens_;
  out.accepted_tokens = accepted_tokens_;
  out.embedding = embedding_;
  return news;
}

bool SequenceHandle::wait_admitted(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return admitted_ || finish_ != FinishReason::none; });
}

void SequenceHandle::publish(const GeneratedToken* token, FinishReason finish, std::string error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
    if (token) pending_.push_back(*token);
    if (finish != FinishReason::none) {
      finish_ = finish;
      error_ = std::move(error);
    }
  }
  cv_.notify_all();
}

void SequenceHandle::publish_embedding(std::vector<float> vector) {
  std::lock_guard<std::mutex> lock(mu_);
  embedding_ = std::move(vector);  // the stop published next wakes the consumer
}

Scheduler::Scheduler(Engine& engine, SchedulerOptions options) : engine_(engine), options_(options) {
  stats_.kv_blocks_total = engine_.kv_blocks().num_blocks();
  stats_.kv_blocks_free = engine_.kv_blocks().num_free();
  reserved_blocks_.assign(static_cast<size_t>(engine_.num_kv_pools()), 0);
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::fits(const std::vector<int64_t>& need, bool beside_reserved) const {
  for (size_t p = 0; p < need.size(); ++p)
    if ((beside_reserved ? reserved_blocks_[p] : 0) + need[p] > engine_.kv_pool(static_cast<int32_t>(p)).num_blocks()) return false;
  return true;
}

Result<std::shared_ptr<SequenceHandle>> Scheduler::submit(SequenceRequest request) {
  if (request.prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (auto bad = validate(request.sampling)) return make_error(ErrorCode::invalid_argument, *bad);
  for (int32_t t : request.prompt)
    if (t < 0 || t >= engine_.vocab_size())
      return make_error(ErrorCode::invalid_argument, "token id " + std::to_string(t) + " is outside the vocabulary");
  if (request.embedding) {
    if (engine_.hidden_width() <= 0)
      return make_error(ErrorCode::unsupported, "this model's family plugin returns no hidden states, so it makes no embeddings");
    if (options_.pipeline_groups > 1)
      return make_error(ErrorCode::unsupported, "embeddings are not served with rolling pipeline groups; serve the model "
                                                "with --pp-groups 1");
    if (static_cast<int64_t>(request.prompt.size()) > engine_.max_context())
      return make_error(ErrorCode::invalid_argument, "the input (" + std::to_string(request.prompt.size()) +
                                                         " tokens) exceeds the context of " +
                                                         std::to_string(engine_.max_context()) + " tokens");
    request.max_tokens = 0;  // nothing is generated: the KV holds the prompt only
    request.cache_namespace.clear();
  } else if (request.max_tokens < 1) {
    return make_error(ErrorCode::invalid_argument, "max_tokens must be at least 1");
  }
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (total > engine_.max_context())
    return make_error(ErrorCode::invalid_argument, "the prompt (" + std::to_string(request.prompt.size()) +
                                                       " tokens) plus max_tokens (" + std::to_string(request.max_tokens) +
                                                       ") exceeds the context of " + std::to_string(engine_.max_context()) + " tokens");
  if (const std::vector<int64_t> need = engine_.kv_blocks_for(total); !fits(need, false)) {
    std::string why;
    for (size_t p = 0; p < need.size(); ++p)
      if (need[p] > engine_.kv_pool(static_cast<int32_t>(p)).num_blocks())
        why = std::to_string(need[p]) + " KV blocks of " + std::to_string(engine_.block_size()) + " tokens (prompt " +
              std::to_string(request.prompt.size()) + " + max_tokens " + std::to_string(request.max_tokens) + ") but the cache" +
              (need.size() > 1 ? " pool " + std::to_string(p) : std::string()) + " holds " +
              std::to_string(engine_.kv_pool(static_cast<int32_t>(p)).num_blocks()) + " in all";
    return make_error(ErrorCode::invalid_argument, "the request needs " + why +
                                                       "; lower max_tokens, or serve with a larger --kv-cache-tokens / --gpu-memory-fraction");
  }
  auto job = std::make_unique<Job>();
  job->req = std::move(request);
  job->queued_at = std::chrono::steady_clock::now();
  job->handle = std::make_shared<SequenceHandle>();
  job->handle->prompt_tokens_ = static_cast<int64_t>(job->req.prompt.size());
  auto handle = job->handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abort_reason_.empty()) return make_error(ErrorCode::conflict, abort_reason_);
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_waiting)
      return make_error(ErrorCode::conflict, "the server's queue is full (" + std::to_string(waiting_.size()) +
                                                 " requests waiting, --max-waiting " + std::to_string(options_.max_waiting) +
                                                 "; memra_scheduler_waiting in /metrics); retry later");
    // Behind every queued job of the same or higher priority.
    auto at = std::find_if(waiting_.begin(), waiting_.end(),
                           [&](const auto& w) { return w->req.priority < job->req.priority; });
    waiting_.insert(at, std::move(job));
    stats_.waiting = static_cast<int64_t>(waiting_.size());
  }
  cv_.notify_all();
  return handle;
}

void Scheduler::abort_all(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort_reason_ = reason.empty() ? std::string("aborted by the server") : std::move(reason);
  }
  cv_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s = stats_;
  // A cancelled job leaves the queue at the loop's next iteration; it waits no more now
  // (a client that timed out at the device gate sees the gauge without it).
  s.waiting = std::count_if(waiting_.begin(), waiting_.end(), [](const auto& j) { return !j->handle->cancelled_.load(); });
  return s;
}

void Scheduler::admit_locked() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end() && static_cast<int64_t>(running_.size()) < options_.max_running;) {
    Job& job = **it;
    if (!engine_.can_open_sequence()) break;  // recurrent-state slots: nobody can open
    std::vector<int64_t> need = engine_.kv_blocks_for(static_cast<int64_t>(job.req.prompt.size()) + job.req.max_tokens);
    if (!fits(need, true)) {
      // It does not fit yet. Smaller ones behind it may start (backfill) until it has
      // waited the window; then they wait for it, so it cannot be starved.
      if (now - job.queued_at >= options_.backfill_window) break;
      ++it;
      continue;
    }
    for (size_t p = 0; p < need.size(); ++p) reserved_blocks_[p] += need[p];
    job.reserved_blocks = std::move(need);
    PrefixCache::Hit hit;
    if (!job.req.cache_namespace.empty()) hit = engine_.prefix_cache().lookup(job.req.cache_namespace, job.req.prompt);
    job.prompt_done = hit.tokens(engine_.block_size());
    job.seq = engine_.open_sequence(std::move(hit.blocks), hit.state, std::move(hit.pool_blocks));
    if (job.embedding()) job.pooler.emplace(*job.req.embedding, static_cast<size_t>(engine_.hidden_width()));
    job.context = job.req.prompt;
    if (job.req.constraint) job.constraint = job.req.constraint();
    if (options_.make_drafter) {
      job.drafter = options_.make_drafter();
      if (job.drafter) {
        job.drafter->attach(job.seq);
        job.gate = SpecGate(options_.spec_policy, job.drafter->draft_token_cost());
      }
    }
    {
      std::lock_guard<std::mutex> hl(job.handle->mu_);
      job.handle->cached_tokens_ = job.prompt_done;
      job.handle->admitted_ = true;
    }
    job.handle->cv_.notify_all();
    stats_.prefix_hit_tokens += job.prompt_done;
    stats_.prompt_tokens += static_cast<int64_t>(job.req.prompt.size());
    int64_t in_group[2] = {0, 0};
    for (const auto& r : running_) ++in_group[r->group & 1];
    job.group = in_group[1] < in_group[0] ? 1 : 0;
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
  }
}

void Scheduler::finish(Job& job, FinishReason reason, std::string error) {
  if (job.seq >= 0) engine_.close_sequence(job.seq);
  job.seq = -1;
  job.drafter.reset();  // a draft model's sequence goes with it
  for (size_t p = 0; p < job.reserved_blocks.size(); ++p) reserved_blocks_[p] -= job.reserved_blocks[p];
  job.reserved_blocks.clear();
  job.handle->publish(nullptr, reason, std::move(error));
}

void Scheduler::update_stats_locked() {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kv_blocks_free = engine_.kv_blocks().num_free();
  stats_.prefix_cache_blocks = engine_.prefix_cache().entries();
}

void Scheduler::cancel_locked() {
  // A client went away: free its KV within this iteration (a job in flight once its step is
  // collected). After abort_all(), every job goes the same way, as aborted.
  const bool abort = !abort_reason_.empty();
  for (auto& j : running_)
    if (!j->in_flight && (abort || j->handle->cancelled_.load()))
      finish(*j, abort ? FinishReason::aborted : FinishReason::cancelled, abort ? abort_reason_ : std::string());
  std::erase_if(running_, [](const auto& j) { return j->seq < 0; });
  for (auto& j : waiting_)
    if (abort || j->handle->cancelled_.load())
      j->handle->publish(nullptr, abort ? FinishReason::aborted : FinishReason::cancelled, abort ? abort_reason_ : std::string());
  if (abort) waiting_.clear();
  std::erase_if(waiting_, [](const auto& j) { return j->handle->cancelled_.load(); });
}

Scheduler::Flight Scheduler::plan_step(int32_t group, std::unique_lock<std::mutex>& lock) {
  Flight f;
  auto member = [&](const Job& j) { return !j.in_flight && !j.embedding() && (group < 0 || j.group == group); };
  std::vector<Job*> decoding;
  for (auto& j : running_)
    if (member(*j) && j->prompt_done >= static_cast<int64_t>(j->req.prompt.size())) decoding.push_back(j.get());
  const bool speculate = options_.make_drafter && static_cast<int64_t>(running_.size()) <= options_.spec_max_batch;
  if (speculate) {
    // Drafts take at most half of the step budget the decode tokens leave, so
    // prompts waiting for prefill keep moving.
    const int64_t n = static_cast<int64_t>(decoding.size());
    const int64_t cap = n == 0 ? 0 : std::max<int64_t>(0, options_.max_step_tokens - n) / (2 * n);
    // Drafting may run a draft model: outside the lock. Only this thread touches running jobs.
    lock.unlock();
    draft_all(decoding, static_cast<int>(std::min<int64_t>(options_.spec_k, cap)));
    lock.lock();
  }
  int64_t budget = options_.max_step_tokens;
  for (Job* j : decoding) {
    if (!speculate) j->feed.assign(1, j->output.back());
    f.reqs.push_back({j->seq, j->feed, j->feed.size() > 1, false});
    f.reqs.back().want_hidden = j->drafter && j->drafter->wants_target_hidden();
    f.jobs.push_back(j);
    f.chunk.push_back(0);
    budget -= static_cast<int64_t>(j->feed.size());
  }
  for (auto& j : running_) {
    if (!member(*j)) continue;
    const int64_t left = static_cast<int64_t>(j->req.prompt.size()) - j->prompt_done;
    if (left <= 0) continue;
    if (budget <= 0 && !f.reqs.empty()) break;
    int64_t n = std::min(left, std::max<int64_t>(1, budget));
    // A prompt step ends where the prefix cache takes the prompt (with recurrent state:
    // its last block boundary, where the state is snapshotted).
    if (!j->req.cache_namespace.empty())
      if (const int64_t point = engine_.next_prefix_cache_point(static_cast<int64_t>(j->req.prompt.size()), j->prompt_done); point > 0)
        n = std::min(n, point - j->prompt_done);
    f.reqs.push_back({j->seq, std::span<const int32_t>(j->req.prompt).subspan(static_cast<size_t>(j->prompt_done), static_cast<size_t>(n)), false, /*prompt=*/true});
    f.reqs.back().want_hidden = j->drafter && j->drafter->wants_target_hidden();
    f.jobs.push_back(j.get());
    f.chunk.push_back(n);
    budget -= n;
  }
  return f;
}

Scheduler::Flight Scheduler::plan_embedding_step() {
  Flight f;
  int64_t budget = options_.max_step_tokens;
  for (auto& j : running_) {
    if (!j->embedding() || j->in_flight) continue;
    const int64_t left = static_cast<int64_t>(j->req.prompt.size()) - j->prompt_done;
    if (left <= 0) continue;
    if (budget <= 0 && !f.reqs.empty()) break;
    const int64_t n = std::min(left, std::max<int64_t>(1, budget));
    StepRequest r;
    r.seq = j->seq;
    r.tokens = std::span<const int32_t>(j->req.prompt).subspan(static_cast<size_t>(j->prompt_done), static_cast<size_t>(n));
    r.prompt = true;
    // Mean pooling reads every row; last-token pooling only the last chunk's last row.
    r.all_logits = j->pooler->pooling() == Pooling::mean;
    r.wants_rows = r.all_logits || n == left;
    f.reqs.push_back(r);
    f.jobs.push_back(j.get());
    f.chunk.push_back(n);
    budget -= n;
  }
  return f;
}

bool Scheduler::embedding_turn() const {
  bool embeddings = false, generation = false;
  for (const auto& j : running_) (j->embedding() ? embeddings : generation) = true;
  return embeddings && (!generation || !last_step_embedding_);
}

void Scheduler::run_embedding_step(std::unique_lock<std::mutex>& lock) {
  Flight f = plan_embedding_step();
  lock.unlock();
  const auto step_start = std::chrono::steady_clock::now();
  auto out = engine_.step_hidden(f.reqs);
  lock.lock();
  stats_.step_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  complete_embedding_step(f, std::move(out));
  std::erase_if(running_, [](const auto& j) { return j->seq < 0; });
  update_stats_locked();
}

void Scheduler::complete_embedding_step(Flight& f, Result<std::vector<std::vector<float>>> out) {
  ++stats_.steps;
  if (!out) {
    for (Job* j : f.jobs) finish(*j, FinishReason::error, out.error().message);
    return;
  }
  size_t row = 0;  // the step's rows, request by request
  for (size_t i = 0; i < f.jobs.size(); ++i) {
    Job& j = *f.jobs[i];
    const StepRequest& r = f.reqs[i];
    const size_t rows = step_rows(r);
    for (size_t k = 0; k < rows && row < out->size(); ++k) j.pooler->add((*out)[row++]);
    j.prompt_done += f.chunk[i];
    if (j.prompt_done < static_cast<int64_t>(j.req.prompt.size())) continue;
    j.handle->publish_embedding(j.pooler->pooled());
    finish(j, FinishReason::stop);  // frees its KV
  }
}

void Scheduler::attach_sampling(Flight& f) {
  f.sampling.assign(f.reqs.size(), RowSampling{});  // sized once: the requests point into it
  f.adjust.assign(f.reqs.size(), {});
  f.probes.clear();
  for (size_t i = 0; i < f.reqs.size(); ++i) {
    Job& j = *f.jobs[i];
    RowSampling& rs = f.sampling[i];
    const SamplingParams& p = j.req.sampling;
    rs.params = &p;
    rs.prompt = j.req.prompt;
    rs.output = j.output;
    rs.position = j.req.prompt.size() + j.output.size();
    const bool logprobs = p.logprobs || p.top_logprobs > 0;
    if (f.chunk[i] > 0) {
      // A prompt chunk: only the one that ends the prompt yields a token.
      const bool last = j.prompt_done + f.chunk[i] >= static_cast<int64_t>(j.req.prompt.size());
      rs.rows = last ? 1 : 0;
      rs.want_logits = last && logprobs;
    } else {
      // The fed token plus drafts: row t assumes the drafts before it were emitted.
      rs.assumed = std::span<const int32_t>(j.feed).subspan(1);
      rs.rows = static_cast<int32_t>(j.feed.size());
      rs.want_logits = logprobs;
    }
    if (rs.rows > 0 && (j.constraint || !j.req.logit_bias.empty())) {
      if (attach_step0(f, i, j, rs.rows)) rs.adjust = f.adjust[i];
      else rs.rows = 0;  // complete_step ends it with the grammar's error
    }
    f.reqs[i].sampling = &rs;
  }
}

bool Scheduler::attach_step0(Flight& f, size_t i, Job& j, int32_t rows) {
  const int64_t vocab = engine_.vocab_size();
  std::vector<RowAdjust>& adjust = f.adjust[i];
  TokenConstraint* c = j.constraint.get();
  bool refused = false;  // a draft the grammar refuses: the rows after it are never read
  for (int32_t t = 0; t < rows; ++t) {
    if (t > 0 && c != nullptr && !refused) {
      // Row t is masked by the constraint after the drafts before it. A refused draft
      // differs from row t-1's (masked) token, so rows t.. are never read: no mask.
      auto probe = c->clone();
      if (probe->advance(j.feed[static_cast<size_t>(t)])) {
        c = probe.get();
        f.probes.push_back(std::move(probe));
      } else {
        refused = true;
      }
    }
    RowAdjust a;
    a.bias = j.req.logit_bias;
    if (c != nullptr && !refused) a.allowed = &c->allowed();
    if (!refused && !any_allowed(a, vocab)) {
      j.grammar_dead = "the sequence's grammar allows no token of the vocabulary here (the model cannot spell what the "
                       "schema requires)";
      return false;
    }
    adjust.push_back(a);
  }
  return true;
}

void Scheduler::complete_step(Flight& f, Result<std::vector<StepRows>> out) {
  ++stats_.steps;
  if (!out) {
    for (Job* j : f.jobs) finish(*j, FinishReason::error, out.error().message);
    return;
  }
  for (size_t i = 0; i < f.jobs.size(); ++i) {
    Job& j = *f.jobs[i];
    StepRows& r = (*out)[i];
    // An MTP drafter reads the hidden states of every position its target computed.
    if (f.reqs[i].want_hidden && j.drafter)
      j.drafter->target_hidden(engine_.sequence_length(j.seq) - static_cast<int64_t>(f.reqs[i].tokens.size()), f.reqs[i].tokens,
                               f.reqs[i].prompt, r.hidden, engine_.hidden_width());
    if (!prompt_read(j, f.chunk[i])) continue;  // more prompt to read
    if (!j.grammar_dead.empty()) {
      finish(j, FinishReason::error, j.grammar_dead);
      continue;
    }
    const size_t before = j.output.size();
    FinishReason end = consume(j, r.logits, r.tokens);
    if (j.seq < 0) continue;  // consume failed the sequence
    if (j.constraint && end != FinishReason::stop)
      for (size_t t = before; t < j.output.size(); ++t)
        if (!j.constraint->advance(j.output[t])) {
          end = FinishReason::error;
          break;
        }
    if (end == FinishReason::error) finish(j, end, "a sampled token broke the sequence's grammar (a bug)");
    else if (end != FinishReason::none) finish(j, end);
  }
}

bool Scheduler::prompt_read(Job& j, int64_t chunk) {
  if (chunk == 0) return true;  // a decode step
  j.feed.clear();
  const int64_t point = j.req.cache_namespace.empty() ? 0 : engine_.next_prefix_cache_point(static_cast<int64_t>(j.req.prompt.size()), j.prompt_done);
  j.prompt_done += chunk;
  if (point > 0 && j.prompt_done == point)
    if (const int64_t written = engine_.cache_prefix(j.req.cache_namespace,
                                                     std::span<const int32_t>(j.req.prompt).first(static_cast<size_t>(j.prompt_done)), j.seq);
        written > 0) {
      std::lock_guard<std::mutex> hl(j.handle->mu_);
      j.handle->cache_written_tokens_ += written;
    }
  return j.prompt_done >= static_cast<int64_t>(j.req.prompt.size());
}

void Scheduler::rebalance_locked(int32_t group) {
  // Finished sequences can leave one group much larger: move the surplus (none of it
  // in flight: the group's step was just collected) to the other group.
  int64_t n[2] = {0, 0};
  for (const auto& j : running_) ++n[j->group & 1];
  int64_t surplus = (n[group] - n[group ^ 1]) / 2;
  for (auto& j : running_)
    if (surplus > 0 && j->group == group && !j->in_flight) {
      j->group = group ^ 1;
      --surplus;
    }
}

Scheduler::Wake Scheduler::wake_locked(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
  if (stop_) return Wake::stop;
  cancel_locked();
  admit_locked();
  if (running_.empty()) {
    update_stats_locked();
    if (!waiting_.empty()) cv_.wait_for(lock, std::chrono::milliseconds(5));
    return Wake::idle;
  }
  return Wake::ready;
}

void Scheduler::run_rolling(std::unique_lock<std::mutex>& lock) {
  std::unique_ptr<Flight> flights[2];
  int32_t group = 0;
  while (true) {
    const Wake w = wake_locked(lock);
    if (w == Wake::stop) break;
    if (w == Wake::idle) continue;
    // This group's previous step first (the other group's stays in flight meanwhile),
    // then its next step, issued before the other group's is collected.
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    Clock::time_point t = Clock::now();
    if (std::unique_ptr<Flight> f = std::move(flights[group])) {
      lock.unlock();
      auto out = engine_.step_collect_sampled(*f->pending, f->reqs);
      lock.lock();
      stats_.step_wait_seconds += since(t);
      t = Clock::now();
      for (Job* j : f->jobs) j->in_flight = false;
      complete_step(*f, std::move(out));
      std::erase_if(running_, [](const auto& j) { return j->seq < 0; });
      cancel_locked();
      update_stats_locked();  // before the lock is next released: what was just published is counted
    }
    rebalance_locked(group);
    auto next = std::make_unique<Flight>(plan_step(group, lock));
    attach_sampling(*next);  // on the last stage's GPU where the engine can
    stats_.host_seconds += since(t);
    if (!next->reqs.empty()) {
      lock.unlock();
      t = Clock::now();
      auto pending = engine_.step_issue_sampled(next->reqs, group);
      lock.lock();
      stats_.step_issue_seconds += since(t);
      if (!pending) {
        complete_step(*next, Result<std::vector<StepRows>>(pending.error()));
      } else {
        next->pending = std::move(*pending);
        for (Job* j : next->jobs) j->in_flight = true;
        flights[group] = std::move(next);
      }
    }
    group ^= 1;
    std::erase_if(running_, [](const auto& j) { return j->seq < 0; });
    update_stats_locked();
  }
  // Shutting down: let the steps in flight finish before their sequences close.
  for (auto& f : flights) {
    if (!f) continue;
    lock.unlock();
    (void)engine_.step_collect_sampled(*f->pending, f->reqs);
    lock.lock();
    for (Job* j : f->jobs) j->in_flight = false;
  }
}

void Scheduler::run() {
  std::unique_lock<std::mutex> lock(mu_);
  if (options_.pipeline_groups > 1) {
    run_rolling(lock);
  } else {
    while (true) {
      const Wake w = wake_locked(lock);
      if (w == Wake::stop) break;
      if (w == Wake::idle) continue;
      last_step_embedding_ = embedding_turn();
      if (last_step_embedding_) {
        run_embedding_step(lock);
        continue;
      }
      Flight f = plan_step(-1, lock);
      lock.unlock();
      const auto step_start = std::chrono::steady_clock::now();
      // The engine samples (on the GPU when the backend is CUDA): logits rows come to
      // the host only for logprobs.
      attach_sampling(f);
      auto out = engine_.step_sampled(f.reqs);
      const double step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      lock.lock();
      stats_.step_wait_seconds += step_seconds;  // one step at a time: issue and wait together
      // Decode-only steps teach the speculation fallback what one more token costs.
      if (out && std::all_of(f.chunk.begin(), f.chunk.end(), [](int64_t c) { return c == 0; })) {
        int64_t tokens = 0;
        for (const StepRequest& r : f.reqs) tokens += static_cast<int64_t>(r.tokens.size());
        step_costs_.observe(tokens, step_seconds);
      }
      complete_step(f, std::move(out));
      std::erase_if(running_, [](const auto& j) { return j->seq < 0; });
      update_stats_locked();
    }
  }
  for (auto& j : running_) finish(*j, FinishReason::aborted, "the server is shutting down");
  for (auto& j : waiting_) j->handle->publish(nullptr, FinishReason::aborted, "the server is shutting down");
  running_.clear();
  waiting_.clear();
}

void Scheduler::draft_all(const std::vector<Job*>& decoding, int k) {
  std::vector<DraftCall> calls;
  std::vector<Job*> owners;
  for (Job* j : decoding) {
    j->feed.assign(1, j->output.back());
    if (!j->drafter) continue;
    if (!j->gate.active()) {
      j->gate.plain(1);
      continue;
    }
    // Drafts beyond the last useful position would only cost: the step that emits
    // max_tokens ends the sequence (this also keeps the KV inside the reservation).
    const int64_t room = std::min<int64_t>(k, j->req.max_tokens - static_cast<int64_t>(j->output.size()) - 1);
    if (room <= 0) continue;
    calls.push_back({j->drafter.get(), j->context, static_cast<int>(room), {}});
    owners.push_back(j);
  }
  // Every job's drafter comes from the same factory: one batch (a draft model
  // runs one step per drafted position for all sequences).
  if (!calls.empty()) calls.front().drafter->draft_batch(calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    std::vector<int32_t>& d = calls[i].out;
    if (static_cast<int>(d.size()) > calls[i].k) d.resize(static_cast<size_t>(calls[i].k));
    if (std::any_of(d.begin(), d.end(), [&](int32_t t) { return t < 0 || t >= engine_.vocab_size(); }))
      continue;  // a broken drafter costs nothing but its time
    owners[i]->feed.insert(owners[i]->feed.end(), d.begin(), d.end());
  }
}

FinishReason Scheduler::consume(Job& j, const std::vector<std::vector<float>>& rows, std::vector<int32_t>& tokens) {
  const size_t drafted = j.feed.size() > 1 && tokens.size() > 1 ? j.feed.size() - 1 : 0;
  if (drafted > 0 && options_.verify_hook) options_.verify_hook(tokens);  // tests: the identity gate must catch it
  // Sample every position exactly as a one-token step would; accept drafts while
  // they equal what was sampled.
  std::vector<GeneratedToken> emitted;
  FinishReason end = FinishReason::none;
  size_t accepted = 0;
  for (size_t t = 0; t <= drafted; ++t) {
    SampleResult s;
    s.token = tokens[t];  // sampled by the engine (on the GPU when it can)
    if (t < rows.size()) fill_logprobs(rows[t], j.req.sampling, s);
    j.output.push_back(s.token);
    j.context.push_back(s.token);
    emitted.push_back({s.token, s.logprob, s.top});
    const bool match = t < drafted && s.token == j.feed[t + 1];
    if (match) ++accepted;
    if (std::find(j.req.stop_ids.begin(), j.req.stop_ids.end(), s.token) != j.req.stop_ids.end()) {
      end = FinishReason::stop;
      break;
    }
    if (static_cast<int64_t>(j.output.size()) >= j.req.max_tokens) {
      end = FinishReason::length;
      break;
    }
    if (!match) break;
  }
  stats_.generated_tokens += static_cast<int64_t>(emitted.size());
  if (drafted > 0) {
    j.drafted += static_cast<int64_t>(drafted);
    j.accepted += static_cast<int64_t>(accepted);
    stats_.spec_drafted += static_cast<int64_t>(drafted);
    stats_.spec_accepted += static_cast<int64_t>(accepted);
    ++stats_.spec_verify_steps;
    const int64_t before = j.gate.fallbacks();
    j.gate.record(static_cast<int64_t>(drafted), static_cast<int64_t>(accepted),
                  verify_token_cost(options_.spec_policy, step_costs_));
    stats_.spec_fallbacks += j.gate.fallbacks() - before;
    {
      std::lock_guard<std::mutex> hl(j.handle->mu_);
      j.handle->drafted_tokens_ = j.drafted;
      j.handle->accepted_tokens_ = j.accepted;
    }
    if (end == FinishReason::none) {
      // Keep the KV of the fed token and the accepted drafts; the last sampled token
      // is the next step's first.
      const int64_t keep = engine_.sequence_length(j.seq) - static_cast<int64_t>(drafted) + static_cast<int64_t>(accepted);
      if (auto st = engine_.truncate_sequence(j.seq, keep); !st) {
        for (const auto& g : emitted) j.handle->publish(&g, FinishReason::none, {});
        finish(j, FinishReason::error, "speculative rollback failed: " + st.error().message);
        return FinishReason::none;
      }
      j.drafter->verified(j.context, static_cast<int>(drafted), static_cast<int>(accepted));
    }
  }
  for (const auto& g : emitted) j.handle->publish(&g, FinishReason::none, {});
  return end;
}

}  // namespace memra::engine
