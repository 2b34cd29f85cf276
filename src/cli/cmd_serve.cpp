// memra serve: the OpenAI-compatible HTTP server (continuous batching; see src/serve/).
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <pthread.h>
#include <thread>

#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "engine/engine.h"
#include "serve/http_server.h"

namespace memra::cli::cmd_serve {
namespace {

struct Args {
  EngineArgs engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  int max_batch = 16;
  int max_queue = 64;
  std::string api_key;
  std::string model_name;
  double grace_s = 10.0;
  int max_body_mb = 8;
  std::string chat_template_file;
  std::vector<std::string> cors_origins;
  double request_timeout_s = 0.0;
  double header_timeout_s = 10.0;
  double idle_timeout_s = 60.0;
};

std::string default_model_name(const Args& a) {
  if (a.engine.model.empty()) return "memra-demo-py-14m";
  std::filesystem::path p(a.engine.model);
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

void run(const Args& a) {
  // SIGINT/SIGTERM are taken by a dedicated thread with sigwait: block them before any thread
  // exists (engine, scheduler, HTTP pool all inherit the mask), so no other thread gets them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Request bodies and their JSON are large and short-lived, and any of ~100 worker threads may
  // hold one: a fixed mmap threshold (glibc's moves up to 32 MB after the first big free) maps
  // and unmaps them instead of leaving their pages in each thread's heap.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  auto engine = open_engine(a.engine);
  serve::ServerOptions opts;
  opts.model_name = a.model_name.empty() ? default_model_name(a) : a.model_name;
  opts.api_key = a.api_key;
  opts.scheduler.max_batch = a.max_batch;
  opts.scheduler.max_queue = a.max_queue;
  opts.max_body_bytes = static_cast<size_t>(a.max_body_mb) << 20;
  opts.cors_origins = a.cors_origins;
  opts.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.request_timeout_s * 1000.0));
  opts.head_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.header_timeout_s * 1000.0));
  opts.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.idle_timeout_s * 1000.0));
  if (!a.chat_template_file.empty()) {
    std::ifstream in(a.chat_template_file, std::ios::binary);
    if (!in) fail("serve: cannot read the chat template file {}", a.chat_template_file);
    opts.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (opts.chat_template.empty()) fail("serve: the chat template file {} is empty", a.chat_template_file);
  }
  serve::HttpServer server(*engine, opts);
  const int port = server.bind(a.host, a.port);

  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(a.grace_s * 1000.0));
  std::mutex mu;
  std::thread stopper;
  std::thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr,
                 "\nmemra serve: %s: finishing running requests (up to %.0f s; press Ctrl-C again to quit now)\n",
                 sig == SIGINT ? "interrupted" : "terminated", a.grace_s);
    {
      std::lock_guard<std::mutex> lk(mu);
      stopper = std::thread([&] { server.stop(grace); });
    }
    sigwait(&signals, &sig);
    std::fprintf(stderr, "memra serve: stopping now\n");
    std::_Exit(130);
  }).detach();

  const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  std::printf("memra serve: model '%s' (%s, backend %s, context %d, batch %d, queue %d)\n",
              opts.model_name.c_str(), model_label(a.engine).c_str(), engine->backend().name().c_str(), engine->ctx(),
              a.max_batch, a.max_queue);
  std::printf("memra serve: listening on http://%s:%d (OpenAI API at http://%s:%d/v1)\n", host.c_str(), port,
              host.c_str(), port);
  std::fflush(stdout);
  server.serve();
  {
    std::lock_guard<std::mutex> lk(mu);
    if (stopper.joinable()) stopper.join();
  }
  std::fprintf(stderr, "memra serve: stopped\n");
}

CommandRegistrar reg("serve", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  cmd->option_defaults()->always_capture_default();  // --help shows each default
  add_engine_args(*cmd, args->engine);
  cmd->add_option("--host", args->host, "address to listen on (0.0.0.0: every interface)");
  cmd->add_option("--port", args->port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--max-batch", args->max_batch, "most sequences decoded together")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-queue", args->max_queue,
                  "most requests waiting for room in the batch (429 beyond); 0: a request runs at once or gets 429")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY' on /v1/ routes");
  cmd->add_option("--model-name", args->model_name, "model id for the API (default: the file name without .gguf)");
  cmd->add_option("--grace", args->grace_s, "seconds running requests may finish after Ctrl-C / SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--max-body-mb", args->max_body_mb, "largest request body in MiB (413 beyond)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--chat-template", args->chat_template_file, "Jinja chat template FILE instead of the model's")
      ->check(CLI::ExistingFile);
  cmd->add_option("--cors-origins", args->cors_origins,
                  "origins whose web pages may call the API, comma-separated ('*': any; none: no CORS)")
      ->delimiter(',');
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "seconds a generation request may run (504 / a stream error beyond); 0: no limit")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--header-timeout", args->header_timeout_s, "seconds a client has to send a request's headers (408)")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--idle-timeout", args->idle_timeout_s, "seconds an idle keep-alive connection stays open")
      ->check(CLI::Range(0.1, 86400.0));
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_serve
