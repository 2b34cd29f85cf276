#include "serve/scheduler.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <unordered_map>

#include "common/error.h"
#include "engine/engine.h"
#include "grammar/matcher.h"
#include "step/logprobs.h"
#include "step/prefix_cache.h"
#include "serve/metrics.h"
#include "serve/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

using Clock = std::chrono::steady_clock;

struct Scheduler::Job {
  GenerationSpec spec;
  std::shared_ptr<RequestStream> stream;
  std::shared_ptr<SequenceCache> seq;  // while prefilling (shared with its prefix-cache entry)
  size_t fed = 0;                      // prompt tokens in seq so far (resumed or prefilled)
  int32_t cached = 0;                  // prompt tokens resumed from the prefix cache
  std::shared_ptr<PrefixCache::Entry> recording;  // the prefix-cache entry its prefill records
  std::vector<float> resumed_logits;   // the whole prompt was in the cache: the logits after it
};

struct Scheduler::Slot {
  Slot(const Tokenizer& tok, std::vector<std::string> stops) : decoder(tok), stop(std::move(stops)) {}
  std::shared_ptr<Job> job;
  int32_t choice = 0;
  std::shared_ptr<SequenceCache> seq;
  SamplingParams params;  // the request's, with this choice's seed
  std::vector<int32_t> history;  // prompt + generated: what the penalties look at
  int32_t generated = 0;         // tokens sampled so far (= token index of the next draw)
  int32_t next = -1;             // sampled, to be fed by the next decode step
  StreamDecoder decoder;
  StopMatcher stop;
  Clock::time_point last_token{};
  bool done = false;
  std::unique_ptr<grammar::Matcher> matcher;  // structured output, null when free
  bool grammar_armed = false;                 // false while still thinking
  std::vector<uint32_t> mask;                 // the next draw's allowed tokens
};

Scheduler::Scheduler(Engine& engine, SchedulerOptions options, Metrics* metrics)
    : engine_(engine), opts_(options), metrics_(metrics) {
  if (opts_.max_batch < 1) fail("--max-batch must be at least 1, got {}", opts_.max_batch);
  if (opts_.max_queue < 0) fail("--max-queue must be at least 0, got {}", opts_.max_queue);
  n_vocab_ = engine_.config().n_vocab;
  const Tokenizer& tok = engine_.tokenizer();  // loaded here, before any other thread can ask for it
  if (tok.n_vocab() == n_vocab_) {
    grammar_vocab_ = grammar::TokenVocab::from_tokenizer(tok);
    no_end_mask_.assign(grammar_vocab_->mask_words(), ~0u);
    if (n_vocab_ % 32) no_end_mask_.back() = (1u << (n_vocab_ % 32)) - 1;
    for (int32_t id : grammar_vocab_->end_ids()) no_end_mask_[static_cast<size_t>(id) / 32] &= ~(1u << (id % 32));
    if (auto id = tok.find("</think>")) think_end_id_ = *id;
  }
}

bool Scheduler::build_mask(Slot& slot) {
  if (!slot.matcher || !slot.grammar_armed) return true;
  slot.mask.resize(grammar_vocab_->mask_words());
  return slot.matcher->fill_mask(slot.mask) > 0;
}

std::span<const uint32_t> Scheduler::mask_of(const Slot& slot) const {
  if (!slot.matcher) return {};
  if (!slot.grammar_armed) return no_end_mask_;
  return slot.mask;
}

Scheduler::~Scheduler() { shutdown(std::chrono::milliseconds(0)); }

void Scheduler::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) return;
  started_ = true;
  worker_ = std::thread([this] { run(); });
}

SubmitStatus Scheduler::submit(GenerationSpec spec, std::shared_ptr<RequestStream>& stream) {
  MEMRA_ASSERT(spec.n >= 1 && spec.n <= opts_.max_batch && !spec.prompt.empty() && spec.max_tokens >= 1,
               "submit: unvalidated request (n {}, prompt {}, max_tokens {})", spec.n, spec.prompt.size(),
               spec.max_tokens);
  stream.reset();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!accepting_) return SubmitStatus::ShuttingDown;
    // max_queue counts requests that must wait: one the batch has room for is always taken, so
    // --max-queue 0 means "run it now or refuse it", not "refuse everything".
    int32_t wanted = running_count_ + spec.n;
    for (const auto& j : queue_) wanted += j->spec.n;
    if (wanted > opts_.max_batch && static_cast<int32_t>(queue_.size()) >= opts_.max_queue)
      return SubmitStatus::QueueFull;
    auto job = std::make_shared<Job>();
    job->stream = std::make_shared<RequestStream>(spec.n, static_cast<int32_t>(spec.prompt.size()));
    job->spec = std::move(spec);
    stream = job->stream;
    queue_.push_back(std::move(job));
    if (metrics_) metrics_->set_queue_depth(static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_all();
  return SubmitStatus::Accepted;
}

void Scheduler::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!draining_) {
      draining_ = true;
      accepting_ = false;
      deadline_ = Clock::now() + grace;
    } else {
      deadline_ = std::min(deadline_, Clock::now() + grace);
    }
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> lk(join_mu_);
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  SchedulerStats s;
  s.queued = static_cast<int32_t>(queue_.size());
  s.running = running_count_;
  s.accepting = accepting_;
  return s;
}

void Scheduler::run() {
  std::vector<std::shared_ptr<Job>> dropped;  // cancelled while queued, or refused at shutdown
  for (;;) {
    bool cut = false, exit_now = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return draining_ || !queue_.empty() || !prefilling_.empty() || !running_.empty(); });
      if (!accepting_) {
        for (auto& j : queue_) dropped.push_back(std::move(j));
        queue_.clear();
      }
      // Requests whose clients left while waiting give their queue places back at once.
      for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->stream->cancelled()) {
          dropped.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      int32_t reserved = static_cast<int32_t>(running_.size());
      for (const auto& j : prefilling_) reserved += j->spec.n;
      // First come, first served: a request that does not fit waits, and so does everything
      // behind it (no starvation of requests with many choices).
      while (!queue_.empty()) {
        std::shared_ptr<Job>& head = queue_.front();
        if (reserved + head->spec.n > opts_.max_batch) break;
        reserved += head->spec.n;
        prefilling_.push_back(std::move(head));
        queue_.pop_front();
      }
      if (draining_) {
        cut = Clock::now() >= deadline_;
        exit_now = queue_.empty() && prefilling_.empty() && running_.empty();
      }
    }
    for (auto& j : dropped) {
      const bool cancelled = j->stream->cancelled();
      for (int32_t c = 0; c < j->spec.n; ++c) {
        ChoiceEvent ev;
        ev.choice = c;
        ev.finish = cancelled ? FinishReason::Cancelled : FinishReason::Error;
        if (!cancelled) ev.error = kShutdownMessage;
        pending_events_.emplace_back(j->stream, std::move(ev));
      }
    }
    dropped.clear();
    if (exit_now) {
      publish_stats();
      flush_events();
      return;
    }
    if (cut) {
      fail_all(kShutdownMessage);
    } else {
      if (opts_.min_tick_interval.count() > 0) {
        const auto next = last_tick_ + opts_.min_tick_interval;
        if (Clock::now() < next) std::this_thread::sleep_until(next);
        last_tick_ = Clock::now();
      }
      reap_cancelled();
      prefill_some();
      decode_step();
    }
    std::erase_if(running_, [](const std::unique_ptr<Slot>& s) { return s->done; });  // frees their caches
    if (PrefixCache* pc = prefix_cache()) {
      pc->maintain();  // parks the sequences just released, evicts down to the budget
      if (metrics_) metrics_->set_prefix_cache(pc->stats());
    }
    publish_stats();  // before the events: a client that sees its end sees its slot freed
    flush_events();
  }
}

void Scheduler::reap_cancelled() {
  std::erase_if(prefilling_, [&](const std::shared_ptr<Job>& j) {
    if (!j->stream->cancelled()) return false;
    for (int32_t c = 0; c < j->spec.n; ++c) {
      ChoiceEvent ev;
      ev.choice = c;
      ev.finish = FinishReason::Cancelled;
      pending_events_.emplace_back(j->stream, std::move(ev));
    }
    return true;
  });
  for (auto& s : running_)
    if (!s->done && s->job->stream->cancelled()) finish_slot(*s, FinishReason::Cancelled);
  std::erase_if(running_, [](const std::unique_ptr<Slot>& s) { return s->done; });
}

void Scheduler::fail_all(const std::string& message) {
  for (auto& j : prefilling_) {
    for (int32_t c = 0; c < j->spec.n; ++c) {
      ChoiceEvent ev;
      ev.choice = c;
      ev.finish = FinishReason::Error;
      ev.error = message;
      pending_events_.emplace_back(j->stream, std::move(ev));
    }
  }
  prefilling_.clear();
  for (auto& s : running_)
    if (!s->done) finish_slot(*s, FinishReason::Error, message);
}

void Scheduler::prefill_some() {
  const int32_t chunk = engine_.prefill_chunk();
  const int32_t budget = opts_.prefill_tokens_per_tick > 0 ? opts_.prefill_tokens_per_tick : chunk;
  int32_t used = 0;
  std::vector<float> logits;
  while (!prefilling_.empty()) {
    std::shared_ptr<Job> job = prefilling_.front();
    try {
      if (!job->seq && start_job(job)) {
        prefilling_.erase(prefilling_.begin());
        if (metrics_) metrics_->add_prompt_tokens(static_cast<int64_t>(job->spec.prompt.size()));
        std::vector<float> resumed = std::move(job->resumed_logits);
        start_choices(job, resumed);
        continue;
      }
      const std::span<const int32_t> rest = std::span<const int32_t>(job->spec.prompt).subspan(job->fed);
      // The chunk the engine will feed next: up to its grid boundary, or shorter where the
      // prefix cache takes a snapshot (cutting anywhere gives the same bits: prefix_cache.h).
      PrefixCache* pc = prefix_cache();
      const int32_t stop = pc ? pc->next_stop(job->recording) : INT32_MAX;
      const size_t take = std::min(rest.size(), static_cast<size_t>(std::max<int64_t>(1, int64_t{stop} - job->fed)));
      const int32_t next_n = engine_.next_chunk_len(*job->seq, take);
      if (used > 0 && used + next_n > budget) return;
      const bool last = next_n == static_cast<int32_t>(rest.size());
      const int32_t fed = engine_.prefill_chunk(*job->seq, rest.first(take), last ? &logits : nullptr);
      MEMRA_ASSERT(fed == next_n, "prefill fed {} tokens, expected {}", fed, next_n);
      job->fed += static_cast<size_t>(fed);
      used += fed;
      if (job->fed < job->spec.prompt.size()) {
        if (pc) pc->progress(job->recording);
        continue;
      }
      if (pc) pc->finish(job->recording, logits);
      prefilling_.erase(prefilling_.begin());
      if (metrics_) metrics_->add_prompt_tokens(static_cast<int64_t>(job->spec.prompt.size()));
      start_choices(job, logits);
    } catch (const std::exception& e) {
      for (int32_t c = 0; c < job->spec.n; ++c) {
        ChoiceEvent ev;
        ev.choice = c;
        ev.finish = FinishReason::Error;
        ev.error = e.what();
        pending_events_.emplace_back(job->stream, std::move(ev));
      }
      if (PrefixCache* pc = prefix_cache()) pc->drop(job->recording);  // its state is in doubt
      std::erase(prefilling_, job);
    }
  }
}

PrefixCache* Scheduler::prefix_cache() const { return opts_.prefix_reuse ? engine_.prefix_cache() : nullptr; }

bool Scheduler::start_job(const std::shared_ptr<Job>& job) {
  job->seq = engine_.new_sequence();
  PrefixCache* pc = prefix_cache();
  if (!pc) return false;
  const std::vector<int32_t>& prompt = job->spec.prompt;
  const auto t0 = Clock::now();
  PrefixCache::Resume r = pc->resume(*job->seq, prompt);
  job->fed = static_cast<size_t>(r.tokens);
  job->cached = r.tokens;
  job->recording = pc->record(job->seq, prompt, r);
  if (engine_.verbose() && r.tokens > 0) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::fprintf(stderr,
                 "memra: prefix cache: resumed %d of %zu prompt tokens (%s), %zu left to prefill; restore %.2f ms\n",
                 r.tokens, prompt.size(),
                 r.logits.empty() ? "a state snapshot" : "the whole prompt, with its logits",
                 prompt.size() - static_cast<size_t>(r.tokens), ms);
  }
  if (r.logits.empty()) return false;
  job->resumed_logits = std::move(r.logits);
  return true;
}

void Scheduler::start_choices(const std::shared_ptr<Job>& job, const std::vector<float>& logits) {
  const Tokenizer& tok = engine_.tokenizer();
  const GenerationSpec& spec = job->spec;
  // All caches first (the copies may fail for lack of memory; then no choice has started).
  std::vector<std::unique_ptr<Slot>> slots;
  for (int32_t c = 0; c < spec.n; ++c) {
    auto slot = std::make_unique<Slot>(tok, spec.stop);
    slot->job = job;
    slot->choice = c;
    if (c == 0) {
      slot->seq = std::move(job->seq);
    } else {
      slot->seq = engine_.new_sequence();
      slot->seq->copy_from(*slots.front()->seq);  // shares the prompt's full KV blocks
    }
    slot->params = spec.sampling;
    slot->params.seed = spec.sampling.seed + static_cast<uint64_t>(c);
    slot->history = spec.prompt;
    if (spec.grammar) {
      if (!grammar_vocab_) fail("structured output needs the model's tokenizer to cover its whole vocabulary");
      slot->matcher = std::make_unique<grammar::Matcher>(spec.grammar, grammar_vocab_);
      slot->grammar_armed = !spec.grammar_after_thinking || think_end_id_ < 0;
    }
    slots.push_back(std::move(slot));
  }
  for (auto& slot : slots) {
    Slot& s = *slot;
    running_.push_back(std::move(slot));
    if (!build_mask(s)) {
      finish_slot(s, FinishReason::GrammarDeadEnd);
      continue;
    }
    const int32_t token = sample_token(logits, s.params, 0, s.history, mask_of(s));
    accept_token(s, token, spec.top_logprobs >= 0 ? logits.data() : nullptr);
  }
}

void Scheduler::decode_step() {
  std::vector<Slot*> active;
  for (auto& s : running_)
    if (!s->done) active.push_back(s.get());
  if (active.empty()) return;
  // Grammar masks of every constrained row, on host threads in parallel.
  std::vector<Slot*> constrained;
  for (Slot* s : active)
    if (s->matcher && s->grammar_armed) constrained.push_back(s);
  if (!constrained.empty()) {
    std::vector<char> ok(constrained.size(), 1);
    std::vector<std::string> errors(constrained.size());
    const int n_constrained = static_cast<int>(constrained.size());
#pragma omp parallel for schedule(dynamic, 1) if (n_constrained > 1)
    for (int i = 0; i < n_constrained; ++i) {
      try {
        ok[static_cast<size_t>(i)] = build_mask(*constrained[static_cast<size_t>(i)]) ? 1 : 0;
      } catch (const std::exception& e) {
        ok[static_cast<size_t>(i)] = 2;
        errors[static_cast<size_t>(i)] = e.what();
      }
    }
    for (size_t i = 0; i < constrained.size(); ++i) {
      if (ok[i] == 0) finish_slot(*constrained[i], FinishReason::GrammarDeadEnd);
      else if (ok[i] == 2) finish_slot(*constrained[i], FinishReason::Error, errors[i]);
    }
    std::erase_if(active, [](const Slot* s) { return s->done; });
    if (active.empty()) return;
  }
  std::vector<SequenceCache*> seqs;
  std::vector<int32_t> tokens;
  std::vector<RowSampling> rows(active.size());
  // Rows that report logprobs need the full logits; otherwise only the ids come back.
  bool need_logits = !opts_.lean_sampling;
  for (size_t b = 0; b < active.size(); ++b) {
    const Slot& s = *active[b];
    seqs.push_back(s.seq.get());
    tokens.push_back(s.next);
    need_logits = need_logits || s.job->spec.top_logprobs >= 0;
    rows[b].params = &s.params;
    rows[b].token_index = static_cast<uint64_t>(s.generated);
    rows[b].history = s.history.data();
    rows[b].history_len = static_cast<int64_t>(s.history.size());
    const std::span<const uint32_t> mask = mask_of(s);
    rows[b].allowed = mask.empty() ? nullptr : mask.data();
    rows[b].allowed_words = static_cast<int64_t>(mask.size());
  }
  try {
    StepOutput out;
    engine_.decode(seqs, tokens, StepSampling{rows, need_logits}, out);
    for (size_t b = 0; b < active.size(); ++b) {
      Slot& s = *active[b];
      const float* row = s.job->spec.top_logprobs >= 0 ? out.logits.data() + b * static_cast<size_t>(n_vocab_) : nullptr;
      accept_token(s, out.tokens[b], row);
    }
  } catch (const std::exception& e) {
    // A failed step leaves the caches of every row in doubt: end them all, keep serving others.
    for (Slot* s : active)
      if (!s->done) finish_slot(*s, FinishReason::Error, e.what());
  }
}

void Scheduler::accept_token(Slot& slot, int32_t token, const float* row) {
  const GenerationSpec& spec = slot.job->spec;
  const auto now = Clock::now();
  if (token < 0) {
    finish_slot(slot, FinishReason::Error,
                "sampling found no allowed token (every logit is -inf or NaN; check logit_bias)");
    return;
  }
  if (metrics_) {
    metrics_->add_generated_tokens(1);
    if (slot.generated == 0) {
      if (slot.choice == 0)
        metrics_->observe_time_to_first_token(std::chrono::duration<double>(now - slot.job->stream->created()).count());
    } else {
      metrics_->observe_time_per_output_token(std::chrono::duration<double>(now - slot.last_token).count());
    }
  }
  if (slot.matcher) {
    if (!slot.grammar_armed) {
      slot.grammar_armed = token == think_end_id_;
    } else if (!slot.matcher->accept_token(token)) {
      finish_slot(slot, FinishReason::Error, "internal error: the grammar refused a token its mask allowed");
      return;
    }
  }
  slot.last_token = now;
  ++slot.generated;
  slot.history.push_back(token);
  slot.next = token;

  const Tokenizer& tok = engine_.tokenizer();
  ChoiceEvent ev;
  ev.choice = slot.choice;
  FinishReason finish = FinishReason::None;
  const bool grammar_done = slot.matcher && slot.matcher->finished();
  if ((!spec.ignore_eos || grammar_done) && tok.is_end_of_generation(token)) {
    // The end token itself is not part of the answer: no text, no logprob entry.
    ev.text = slot.stop.feed(slot.decoder.flush());
    ev.text += slot.stop.flush();
    finish = FinishReason::Stop;
  } else {
    if (row) ev.logprobs.push_back(token_logprobs(std::span<const float>(row, static_cast<size_t>(n_vocab_)), token,
                                                  spec.top_logprobs));
    const bool hidden = spec.skip_special && tok.is_special(token);
    ev.text = slot.stop.feed(hidden ? std::string() : slot.decoder.push(token));
    if (slot.stop.matched()) {
      finish = FinishReason::Stop;
    } else if (slot.generated >= spec.max_tokens || slot.seq->pos() >= engine_.ctx()) {
      ev.text += slot.stop.feed(slot.decoder.flush());
      if (slot.stop.matched()) {
        finish = FinishReason::Stop;
      } else {
        ev.text += slot.stop.flush();
        finish = FinishReason::Length;
      }
    }
  }
  if (finish != FinishReason::None) {
    // The next turn of a chat renders this answer into its history: keep the state after it.
    if (PrefixCache* pc = prefix_cache())
      pc->retire(slot.job->recording, *slot.seq,
                 std::span<const int32_t>(slot.history).first(static_cast<size_t>(slot.seq->pos())));
    ev.finish = finish;
    ev.completion_tokens = slot.generated;
    ev.cached_tokens = slot.job->cached;
    slot.done = true;
  }
  if (finish != FinishReason::None || !ev.text.empty() || !ev.logprobs.empty())
    pending_events_.emplace_back(slot.job->stream, std::move(ev));
}

void Scheduler::finish_slot(Slot& slot, FinishReason reason, const std::string& error) {
  ChoiceEvent ev;
  ev.choice = slot.choice;
  ev.finish = reason;
  ev.error = error;
  ev.completion_tokens = slot.generated;
  ev.cached_tokens = slot.job->cached;
  slot.done = true;
  pending_events_.emplace_back(slot.job->stream, std::move(ev));
}

void Scheduler::flush_events() {
  if (pending_events_.empty()) return;
  // One push (one lock, one wake-up) per request per tick, events in generation order.
  std::vector<RequestStream*> order;
  std::unordered_map<RequestStream*, std::pair<std::shared_ptr<RequestStream>, std::vector<ChoiceEvent>>> groups;
  for (auto& [stream, ev] : pending_events_) {
    auto [it, inserted] = groups.try_emplace(stream.get());
    if (inserted) {
      it->second.first = stream;
      order.push_back(stream.get());
    }
    it->second.second.push_back(std::move(ev));
  }
  pending_events_.clear();
  for (RequestStream* s : order) {
    auto& g = groups[s];
    g.first->push(g.second);
  }
}

void Scheduler::publish_stats() {
  int32_t running = static_cast<int32_t>(running_.size());
  for (const auto& j : prefilling_) running += j->spec.n;
  std::lock_guard<std::mutex> lk(mu_);
  running_count_ = running;
  if (metrics_) {
    metrics_->set_running(running);
    metrics_->set_queue_depth(static_cast<int64_t>(queue_.size()));
  }
}

}  // namespace memra::serve
