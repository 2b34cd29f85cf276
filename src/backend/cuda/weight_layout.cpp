// Repacking GGUF weight rows into the device layout (weight_layout.h), on the host at load time.
#include "backend/cuda/weight_layout.h"

#include "backend/cuda/matmul_order.h"

#include <cstring>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"

namespace memra::cuda {

namespace {

size_t round16(size_t n) { return (n + 15) / 16 * 16; }

// Packs 32 values (0..15) in Q4_0 nibble order: byte i = v[i] | v[i + 16] << 4.
void pack_nibbles(const uint8_t* v, uint8_t* out) {
  for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>((v[i] & 0xF) | ((v[i + 16] & 0xF) << 4));
}

// Q4_K / Q5_K super-block field offsets (ggml): d, dmin, scales[12], [qh[32]], qs[128].
constexpr int kK4Bytes = 144, kK5Bytes = 176, kK6Bytes = 210;

}  // namespace

GgmlType device_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q8_0:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return t;
    default:
      return GgmlType::F16;
  }
}

DevWeight plan_layout(GgmlType file_type, int64_t n_in, int64_t n_out, int64_t n_mat) {
  DevWeight w;
  w.type = device_type(file_type);
  w.n_in = n_in;
  w.n_out = n_out;
  w.n_mat = n_mat;
  w.nb = n_in / 32;
  w.ns = n_slots(w.nb);
  const size_t nb = static_cast<size_t>(w.nb), ns = static_cast<size_t>(w.ns);
  size_t bytes = 0;
  switch (w.type) {
    case GgmlType::F32: bytes = static_cast<size_t>(n_in) * 4; break;
    case GgmlType::F16: case GgmlType::BF16: bytes = static_cast<size_t>(n_in) * 2; break;
    case GgmlType::Q4_0: w.off_b = static_cast<uint32_t>(ns * 16); bytes = ns * 18; break;
    case GgmlType::Q8_0: w.off_b = static_cast<uint32_t>(ns * 32); bytes = ns * 34; break;
    case GgmlType::Q4_K: w.off_b = static_cast<uint32_t>(ns * 16); bytes = ns * 16 + nb / 8 * 16; break;
    case GgmlType::Q5_K:
      w.off_b = static_cast<uint32_t>(ns * 16);
      w.off_c = static_cast<uint32_t>(ns * 20);
      bytes = ns * 20 + nb / 8 * 16;
      break;
    case GgmlType::Q6_K:
      w.off_b = static_cast<uint32_t>(ns * 16);
      w.off_c = static_cast<uint32_t>(ns * 24);
      bytes = ns * 26 + nb / 8 * 2;
      break;
    default: MEMRA_ASSERT(false, "no device layout for type");
  }
  if (w.type != GgmlType::F32 && w.type != GgmlType::F16 && w.type != GgmlType::BF16)
    MEMRA_ASSERT(n_in % 32 == 0, "quantized rows must be whole blocks");
  w.row_stride = round16(bytes);
  w.mat_stride = w.row_stride * static_cast<size_t>(n_out);
  return w;
}

void repack_rows(const DevWeight& w, GgmlType file_type, const uint8_t* src, int64_t rows, uint8_t* dst) {
  const size_t src_row = quant::row_bytes(file_type, w.n_in);
  const int64_t nb = w.nb;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + src_row * static_cast<size_t>(r);
    uint8_t* d = dst + w.row_stride * static_cast<size_t>(r);
    std::memset(d, 0, w.row_stride);
    uint8_t v[32];
    if (w.type != file_type) {  // converted to F16
      std::vector<float> f(static_cast<size_t>(w.n_in));
      quant::dequantize_row(file_type, s, f.data(), w.n_in);
      for (int64_t i = 0; i < w.n_in; ++i) {
        uint16_t h = quant::f32_to_f16(f[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      continue;
    }
    switch (w.type) {
      case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: std::memcpy(d, s, src_row); break;
      case GgmlType::Q4_0:  // ggml block: f16 d, qs[16] already in our nibble order
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t k = slot_of_block(b, nb);
          std::memcpy(d + 16 * k, s + 18 * b + 2, 16);
          std::memcpy(d + w.off_b + 2 * k, s + 18 * b, 2);
        }
        break;
      case GgmlType::Q8_0:  // f16 d, int8 qs[32]
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t k = slot_of_block(b, nb);
          std::memcpy(d + 32 * k, s + 34 * b + 2, 32);
          std::memcpy(d + w.off_b + 2 * k, s + 34 * b, 2);
        }
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: {
        const bool five = w.type == GgmlType::Q5_K;
        const int sb_bytes = five ? kK5Bytes : kK4Bytes;
        const uint32_t meta_off = five ? w.off_c : w.off_b;
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
          const uint8_t* blk = s + sb_bytes * sb;
          const uint8_t* qh = blk + 16;                 // Q5_K only
          const uint8_t* qs = blk + (five ? 48 : 16);
          std::memcpy(d + meta_off + 16 * sb, blk, 16);  // d, dmin, scales[12]
          for (int i = 0; i < 8; ++i) {
            const int g = i / 2;
            uint32_t high = 0;
            for (int l = 0; l < 32; ++l) {
              v[l] = (i % 2 == 0) ? (qs[32 * g + l] & 0xF) : (qs[32 * g + l] >> 4);
              if (five) high |= static_cast<uint32_t>((qh[l] >> i) & 1) << l;
            }
            const int64_t k = slot_of_block(sb * 8 + i, nb);
            pack_nibbles(v, d + 16 * k);
            if (five) std::memcpy(d + w.off_b + 4 * k, &high, 4);
          }
        }
        break;
      }
      case GgmlType::Q6_K:
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
          const uint8_t* blk = s + kK6Bytes * sb;
          const uint8_t* ql = blk;
          const uint8_t* qh = blk + 128;
          const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
          std::memcpy(d + w.off_c + 2 * w.ns + 2 * sb, blk + 208, 2);  // f16 d
          for (int i = 0; i < 8; ++i) {
            const int h = i / 4, k = i % 4;
            uint32_t words[2] = {0, 0};
            for (int l = 0; l < 32; ++l) {
              const uint8_t lq = ql[64 * h + l + (k % 2 == 1 ? 32 : 0)];
              v[l] = (k < 2) ? (lq & 0xF) : (lq >> 4);
              const uint32_t hb = (qh[32 * h + l] >> (2 * k)) & 3;
              const int wsel = l / 16, k4 = (l % 16) / 4, p = l % 4;
              words[wsel] |= hb << (8 * p + 2 * k4);
            }
            const int64_t slot = slot_of_block(sb * 8 + i, nb);
            pack_nibbles(v, d + 16 * slot);
            std::memcpy(d + w.off_b + 8 * slot, words, 8);
            d[w.off_c + 2 * slot] = static_cast<uint8_t>(sc[8 * h + 2 * k]);
            d[w.off_c + 2 * slot + 1] = static_cast<uint8_t>(sc[8 * h + 2 * k + 1]);
          }
        }
        break;
      default: MEMRA_ASSERT(false, "repack: unhandled type");
    }
  }
}

namespace {
void k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
int nibble(const uint8_t* qs16, int l) { return l < 16 ? (qs16[l] & 0xF) : (qs16[l - 16] >> 4); }
}  // namespace

void unpack_row(const DevWeight& w, const uint8_t* row, float* out) {
  const int64_t nb = w.nb;
  switch (w.type) {
    case GgmlType::F32: std::memcpy(out, row, static_cast<size_t>(w.n_in) * 4); return;
    case GgmlType::F16: case GgmlType::BF16:
      quant::dequantize_row(w.type, row, out, w.n_in);
      return;
    default: break;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k = slot_of_block(b, nb);
    const uint8_t* qs = row + 16 * k;
    float* o = out + 32 * b;
    uint16_t h;
    switch (w.type) {
      case GgmlType::Q4_0: {
        std::memcpy(&h, row + w.off_b + 2 * k, 2);
        float d = quant::f16_to_f32(h);
        for (int l = 0; l < 32; ++l) o[l] = d * static_cast<float>(nibble(qs, l) - 8);
        break;
      }
      case GgmlType::Q8_0: {
        std::memcpy(&h, row + w.off_b + 2 * k, 2);
        float d = quant::f16_to_f32(h);
        for (int l = 0; l < 32; ++l) o[l] = d * static_cast<float>(static_cast<int8_t>(row[32 * k + l]));
        break;
      }
      case GgmlType::Q4_K: case GgmlType::Q5_K: {
        const bool five = w.type == GgmlType::Q5_K;
        const uint8_t* meta = row + (five ? w.off_c : w.off_b) + 16 * (b / 8);
        uint16_t hd, hm;
        std::memcpy(&hd, meta, 2);
        std::memcpy(&hm, meta + 2, 2);
        int sc, m;
        k_scale_min(static_cast<int>(b % 8), meta + 4, sc, m);
        float d = quant::f16_to_f32(hd) * sc, mn = quant::f16_to_f32(hm) * m;
        uint32_t high = 0;
        if (five) std::memcpy(&high, row + w.off_b + 4 * k, 4);
        for (int l = 0; l < 32; ++l) o[l] = d * static_cast<float>(nibble(qs, l) + 16 * ((high >> l) & 1)) - mn;
        break;
      }
      case GgmlType::Q6_K: {
        uint32_t words[2];
        std::memcpy(words, row + w.off_b + 8 * k, 8);
        std::memcpy(&h, row + w.off_c + 2 * w.ns + 2 * (b / 8), 2);
        float d = quant::f16_to_f32(h);
        for (int l = 0; l < 32; ++l) {
          const int wsel = l / 16, k4 = (l % 16) / 4, p = l % 4;
          int q = nibble(qs, l) | static_cast<int>(((words[wsel] >> (8 * p + 2 * k4)) & 3) << 4);
          int sc = static_cast<int8_t>(row[w.off_c + 2 * k + (l / 16)]);
          o[l] = d * static_cast<float>(sc) * static_cast<float>(q - 32);
        }
        break;
      }
      default: MEMRA_ASSERT(false, "unpack: unhandled type");
    }
  }
}

}  // namespace memra::cuda
