// One model behind the gateway: its folder, the names a request's `model` may use for it, its
// config, tokenizer and prompts, its own limits (inputs per request, chunk sizes), its own
// replicas (each with its own flow-control bound: one model's backlog never takes another's room)
// and its metrics. A gateway serves one or several
// (`petal serve --model A --model B`; model_select.h says which a request gets).
// Thread-safety: immutable after LoadServedModel, except `replicas` and `metrics`, which are
// internally synchronised.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "gateway/chunker.h"
#include "gateway/metrics.h"
#include "gateway/model_select.h"
#include "gateway/replica_set.h"
#include "gateway/sparse_static.h"
#include "model/config.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"

namespace petal::gateway {

// What a gateway is told about one model.
struct ModelOptions {
  std::string model_dir;   // tokenizer.json + config.json (+ sentence-transformers files)
  std::string model_name;  // reported as `model`; default: model_dir's last component
  // More names a request's `model` may use (e.g. the hub id ORG/NAME it was given as); the
  // folder's own name is always one.
  std::vector<std::string> aliases;
  std::vector<std::string> servers;  // its inference servers, host:port (or unix:, local:)
  // Its own limits (`petal serve --max-inputs 8 --max-inputs 64`: one per --model); unset: the
  // gateway's (GatewayOptions' max_inputs, chunk and flow.max_held_tokens).
  std::optional<size_t> max_inputs;         // inputs per request (at least 1)
  std::optional<int> chunk_max_seqs;        // ChunkLimits::max_seqs
  std::optional<int64_t> chunk_max_tokens;  // ChunkLimits::max_tokens
  std::optional<int64_t> max_held_tokens;   // its replicas' bound; 0: its memory-sized share
};

struct ServedModel {
  ModelNames names;  // name, aliases and task
  std::string dir;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  Prompts prompts;  // sentence-transformers prompts
  // A SPLADE Router model's inference-free query encoder (sparse_static.h); null for others.
  std::shared_ptr<const SparseStaticQuery> static_query;
  size_t max_inputs = 2048;  // inputs per request (beyond: 413)
  ChunkLimits chunk;         // how a request's sequences are split over its replicas
  std::unique_ptr<ReplicaSet> replicas;
  mutable GatewayMetrics metrics;  // rendered with the label model="<name>"
  // A multi-vector model's token vectors cross from the server as float16 for MaxSim: set when
  // its first replica computes in bf16 (backend "cuda"), whose rows carry 8 mantissa bits, so
  // float16's 11 add a rounding ~8x below the engine's own; float32 for the CPU's fp32 engine.
  // PETAL_TOKEN_VECTORS_F16=0 / 1 overrides (A/B runs).
  bool token_vectors_f16 = false;

  const std::string& name() const { return names.name; }
  // The longest input the gateway sends: max_seq_length, else max_position_embeddings.
  int MaxInputTokens() const {
    return config.max_seq_length > 0 ? config.max_seq_length : config.max_position_embeddings;
  }
};

// How every model's replicas are run (GatewayOptions' shared settings).
struct ReplicaSettings {
  std::chrono::milliseconds health_interval;
  std::chrono::milliseconds request_timeout;
  FlowOptions flow;
  std::chrono::microseconds reply_poll;
};

// The names a request may use for the model (its name: model_name, else the folder's name; the
// folder's name and the given aliases) and its task (from its config).
StatusOr<ModelNames> NamesOf(const ModelOptions& o);

// Loads the model's config, tokenizer and prompts and starts its ReplicaSet (which checks every
// replica's health once).
StatusOr<std::unique_ptr<ServedModel>> LoadServedModel(const ModelOptions& o,
                                                       const ReplicaSettings& rs);

}  // namespace petal::gateway
