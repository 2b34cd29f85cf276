// Tensor binding: looks tensors up by GGUF name, checks their ggml shape against what the config
// implies, and uploads them to the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace memra::gguf { class File; struct TensorInfo; }

namespace memra {

class Model;

class TensorBinder {
 public:
  TensorBinder(const gguf::File& file, Backend& backend, Model& model);
  // A 2-D (or 3-D for expert stacks) weight of ggml shape [n_in, n_out(, n_mat)].
  WeightRef matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat = 1);
  // Same, but absent is fine (returns an invalid ref).
  WeightRef matrix_opt(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat = 1);
  // A float vector of exactly `n` elements (any decodable type; converted to F32 on upload).
  VecRef vec(const std::string& name, int64_t n);
  // A tensor with the given ggml shape, flattened into a float vector (e.g. ssm_conv1d [K, C]).
  VecRef vec_shaped(const std::string& name, std::vector<int64_t> ne);
  bool has(const std::string& name) const;
  // ggml dimension i of a tensor that must exist.
  int64_t dim(const std::string& name, int i) const;
  // Fails with the size needed when the backend cannot hold the file's weights as it stores them
  // (matrices in its layout, vectors as float32), before anything is uploaded.
  void check_fits() const;
  // Every tensor of the file must have been bound: leftovers mean we misread the architecture.
  // Ends the load's progress report (a summary line when the load took long enough to report).
  void check_all_used() const;

 private:
  const gguf::TensorInfo& find(const std::string& name) const;
  // Counts a bound tensor's bytes; a line on stderr every few seconds once the load is slow (a
  // 67 GB model takes minutes to repack and copy to a GPU; a small one stays silent).
  void progress(uint64_t bytes);
  const gguf::File& file_;
  Backend& backend_;
  Model& model_;
  std::vector<std::string> used_;
  // The file's tensors in the order of their bytes (part, offset): while one is uploaded, the
  // next one's bytes are read ahead (a backend that copies weights reads the file once, in order).
  std::vector<const gguf::TensorInfo*> file_order_;
  uint64_t file_bytes_ = 0, bound_bytes_ = 0;
  std::chrono::steady_clock::time_point start_, last_report_;
  bool reported_ = false;
};

// The pieces architectures bind with (model/layer_binders.cpp; names as llama.cpp writes them).
// Every layer's trunk: its mixer kind, its two norms (blk.N.attn_norm, blk.N.<traits.post_norm>)
// and its mixer (attention or Gated DeltaNet, by the layer's kind); then its FFN from `ffn`.
void bind_layers(TensorBinder& b, Model& m, const std::function<FfnWeights(int layer)>& ffn);
AttentionWeights bind_attention(TensorBinder& b, const ModelConfig& c, int layer);
// beta / alpha as the traits' gdn_gate_layout says: ssm_beta + ssm_alpha, or one fused ssm_ba.
DeltaNetWeights bind_deltanet(TensorBinder& b, const ModelConfig& c, int layer);
FfnWeights bind_dense_ffn(TensorBinder& b, const ModelConfig& c, int layer);
FfnWeights bind_moe_ffn(TensorBinder& b, const ModelConfig& c, int layer);
void bind_embeddings(TensorBinder& b, Model& m);

}  // namespace memra
