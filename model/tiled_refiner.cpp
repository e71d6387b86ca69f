#include "tiled_refiner.h"

#include "conv.h"

#include "group_norm_apply.h"
#include "group_norm_cpu.h"

#include <vector>

namespace corridorkey::model {
namespace {

struct Tile {
  int64_t r0, r1, c0, c1;
};

std::vector<Tile> tiles_of_row(int64_t r0, int64_t r1, int64_t W, int64_t t) {
  std::vector<Tile> v;
  for (int64_t c = 0; c < W; c += t) v.push_back({r0, r1, c, std::min(c + t, W)});
  return v;
}

/// src[:, :, r0-h : r1+h, c0-h : c1+h] with zeros outside the image (the convs' padding).
torch::Tensor region(const torch::Tensor& src, const Tile& t, int64_t h) {
  const int64_t H = src.size(2), W = src.size(3);
  const int64_t ra = std::max<int64_t>(t.r0 - h, 0), rb = std::min(t.r1 + h, H);
  const int64_t ca = std::max<int64_t>(t.c0 - h, 0), cb = std::min(t.c1 + h, W);
  auto x = src.slice(2, ra, rb).slice(3, ca, cb);
  const int64_t top = ra - (t.r0 - h), bottom = (t.r1 + h) - rb;
  const int64_t left = ca - (t.c0 - h), right = (t.c1 + h) - cb;
  // Keep the source's layout: a channels-last map must reach the convolution channels-last
  // (constant_pad_nd returns NCHW, and a layout mismatch costs oneDNN a reorder per tile).
  const auto fmt = src.suggest_memory_format();
  if (top || bottom || left || right)
    return at::constant_pad_nd(x, {left, right, top, bottom}, 0).contiguous(fmt);
  return x.contiguous(fmt);
}

/// Zeroes the part of an intermediate over tile t extended by h that lies outside the image:
/// the next conv must see its zero padding there, not values computed from padding.
void zero_outside(torch::Tensor& a, const Tile& t, int64_t h, int64_t H, int64_t W) {
  const int64_t top = std::max<int64_t>(h - t.r0, 0), bottom = std::max<int64_t>(t.r1 + h - H, 0);
  const int64_t left = std::max<int64_t>(h - t.c0, 0), right = std::max<int64_t>(t.c1 + h - W, 0);
  if (top) a.slice(2, 0, top).zero_();
  if (bottom) a.slice(2, a.size(2) - bottom, a.size(2)).zero_();
  if (left) a.slice(3, 0, left).zero_();
  if (right) a.slice(3, a.size(3) - right, a.size(3)).zero_();
}

torch::Tensor conv_valid(const torch::nn::Conv2d& conv, const torch::Tensor& x, int64_t d) {
  TORCH_CHECK(conv->options.dilation()->at(0) == d, "tiled refiner: dilation ", d, " is not the conv's");
  return functional::conv2d(conv, x, 0);  // Winograd inside a WinogradConvScope (model/conv.h)
}

/// Image-global GroupNorm statistics merged over tiles (Chan et al. parallel variance):
/// each tile contributes (count, mean, M2) per (sample, group), merged in double.
class GroupStats {
 public:
  // Accumulators stay on the tensors' device (no host sync: CUDA-graph capturable);
  // float64 except on MPS, which has none.
  GroupStats(int64_t batch, int64_t groups, torch::Device device) : B_(batch), G_(groups), n_(0) {
    const auto dt = device.is_mps() ? torch::kFloat : torch::kDouble;
    mean_ = torch::zeros({batch, groups}, torch::TensorOptions().dtype(dt).device(device));
    m2_ = torch::zeros_like(mean_);
  }
  void add(const torch::Tensor& a) {  // a: [B, C, h, w], core pixels only
    torch::Tensor mbd, m2bd;
    double nb = 0;
    if (kernels::group_norm_cpu_supported(a, G_) && kernels::cpu_kernels_enabled()) {
      // One read of the tile in its own layout (channels-last included), float64 moments.
      auto m = kernels::group_moments(a, G_);
      nb = m.count;
      mbd = m.mean.to(mean_.scalar_type());
      m2bd = m.m2.to(mean_.scalar_type());
    } else {
      auto v = a.to(torch::kFloat).reshape({B_, G_, -1});
      nb = static_cast<double>(v.size(2));
      // One Welford pass per tile (population variance), merged across tiles below.
      auto [varb, mb] = torch::var_mean(v, /*dim=*/{-1}, /*correction=*/0, /*keepdim=*/false);
      mbd = mb.to(mean_.scalar_type());
      m2bd = varb.to(mean_.scalar_type()) * nb;
    }
    const double na = n_, n = na + nb;
    auto delta = mbd - mean_;
    mean_ = mean_ + delta * (nb / n);
    m2_ = m2_ + m2bd + delta.square() * (na * nb / n);
    n_ = n;
  }
  /// float32 mean and 1/sqrt(var + eps) on `device`, as torch's GroupNorm computes them.
  std::pair<torch::Tensor, torch::Tensor> finish(double eps) const {
    auto var = m2_ / n_;
    return {mean_.to(torch::kFloat), (var + eps).rsqrt().to(torch::kFloat)};
  }

 private:
  int64_t B_, G_;
  double n_;
  torch::Tensor mean_, m2_;
};

struct Norm {
  torch::Tensor mean, rstd, gamma, beta;
  int64_t groups;
};

Norm frozen(const torch::nn::GroupNorm& gn, const GroupStats& s) {
  auto [m, r] = s.finish(gn->options.eps());
  return {m, r, gn->weight, gn->bias, gn->options.num_groups()};
}

torch::Tensor apply(const Norm& n, const torch::Tensor& x,
                    const std::optional<torch::Tensor>& residual, bool relu) {
  return kernels::group_norm_apply(x, n.mean, n.rstd, n.gamma, n.beta, n.groups, residual, relu);
}

/// Writes a block's output tiles back into X (in place) as soon as no later tile still
/// reads the old values there. Tiles run in raster order and read a halo of `b` px, so:
/// a tile's right strip (b columns) waits for its right neighbour, its bottom band (b rows)
/// for the whole next row of tiles; everything else is written at once. Pending data is
/// O(b x width), not a row of tiles.
class InPlaceTiles {
 public:
  InPlaceTiles(torch::Tensor& X, int64_t b) : X_(X), b_(b) {}

  void tile_done(const Tile& t, const torch::Tensor& y, bool last_in_row) {
    flush_right();
    const int64_t rows = t.r1 - t.r0, cols = t.c1 - t.c0;
    const int64_t hb = std::min(b_, rows), wb = last_in_row ? 0 : std::min(b_, cols);
    put(t.r0, t.c0, y.slice(2, 0, rows - hb).slice(3, 0, cols - wb));
    if (wb) right_ = {y.slice(2, 0, rows - hb).slice(3, cols - wb, cols).clone(), t.r0, t.c1 - wb};
    band_.push_back({y.slice(2, rows - hb, rows).clone(), t.r1 - hb, t.c0});
  }
  void row_done() {
    flush_right();
    for (auto& p : prev_band_) put(p.r, p.c, p.t);
    prev_band_ = std::move(band_);
    band_.clear();
  }
  void finish() {
    row_done();
    row_done();
  }

 private:
  struct Piece {
    torch::Tensor t;
    int64_t r = 0, c = 0;
  };
  void put(int64_t r, int64_t c, const torch::Tensor& t) {
    if (t.numel()) X_.slice(2, r, r + t.size(2)).slice(3, c, c + t.size(3)).copy_(t);
  }
  void flush_right() {
    if (right_.t.defined()) put(right_.r, right_.c, right_.t);
    right_ = {};
  }
  torch::Tensor& X_;
  int64_t b_;
  Piece right_;
  std::vector<Piece> band_, prev_band_;
};

}  // namespace

torch::Tensor tiled_refiner_forward(CNNRefinerImpl& r, const torch::Tensor& input,
                                    const TiledRefinerOptions& opt) {
  const int64_t B = input.size(0), H = input.size(2), W = input.size(3), T = opt.tile_size;
  if (H <= T && W <= T) return r.forward_input(input);  // one tile: nothing to save
  const auto dev = input.device();
  auto stem_conv = r.stem->ptr<torch::nn::Conv2dImpl>(0);
  torch::nn::Conv2d stem(stem_conv);
  torch::nn::GroupNorm stem_gn(r.stem->ptr<torch::nn::GroupNormImpl>(1));
  const int64_t C = stem->options.out_channels(), G = stem_gn->options.num_groups();

  auto for_each_tile = [&](auto&& fn) {
    for (int64_t r0 = 0; r0 < H; r0 += T) {
      const int64_t r1 = std::min(r0 + T, H);
      for (const auto& t : tiles_of_row(r0, r1, W, T)) fn(t);
    }
  };

  // ---- stem: conv3x3 (7 -> C) -> GN -> ReLU, written into X --------------------------
  GroupStats s_stem(B, G, dev);
  for_each_tile([&](const Tile& t) { s_stem.add(conv_valid(stem, region(input, t, 1), 1)); });
  const Norm n_stem = frozen(stem_gn, s_stem);
  const auto fmt = input.suggest_memory_format();
  auto X = torch::empty({B, C, H, W}, input.options().memory_format(fmt));
  for_each_tile([&](const Tile& t) {
    X.slice(2, t.r0, t.r1).slice(3, t.c0, t.c1)
        .copy_(apply(n_stem, conv_valid(stem, region(input, t, 1), 1), std::nullopt, true));
  });

  // ---- residual blocks: x = relu(GN2(conv2(relu(GN1(conv1 x)))) + x) -----------------
  torch::Tensor delta;
  for (size_t k = 0; k < r.res.size(); ++k) {
    auto& blk = *r.res[k];
    const int64_t d = blk.conv1->options.dilation()->at(0);
    const bool last = k + 1 == r.res.size();

    GroupStats s1(B, G, dev);
    for_each_tile([&](const Tile& t) { s1.add(conv_valid(blk.conv1, region(X, t, d), d)); });
    const Norm n1 = frozen(blk.gn1, s1);

    // conv2's input over the tile core, computed from X with a 2d halo.
    auto pre_gn2 = [&](const Tile& t) {
      auto h1 = apply(n1, conv_valid(blk.conv1, region(X, t, 2 * d), d), std::nullopt, true);
      zero_outside(h1, t, d, H, W);
      return conv_valid(blk.conv2, h1, d);
    };
    GroupStats s2(B, G, dev);
    for_each_tile([&](const Tile& t) { s2.add(pre_gn2(t)); });
    const Norm n2 = frozen(blk.gn2, s2);

    if (last) {
      // The last block's output only feeds the 1x1 final conv: straight into delta.
      delta = torch::empty({B, r.final->options.out_channels(), H, W}, input.options().memory_format(fmt));
      for_each_tile([&](const Tile& t) {
        auto res = X.slice(2, t.r0, t.r1).slice(3, t.c0, t.c1);
        auto y = apply(n2, pre_gn2(t), res, true);
        delta.slice(2, t.r0, t.r1).slice(3, t.c0, t.c1)
            .copy_(r.final->forward(y) * CNNRefinerImpl::kOutputScale);
      });
    } else {
      InPlaceTiles writer(X, 2 * d);
      for (int64_t r0 = 0; r0 < H; r0 += T) {
        const auto row = tiles_of_row(r0, std::min(r0 + T, H), W, T);
        for (size_t j = 0; j < row.size(); ++j) {
          const auto& t = row[j];
          auto res = X.slice(2, t.r0, t.r1).slice(3, t.c0, t.c1);
          writer.tile_done(t, apply(n2, pre_gn2(t), res, true), j + 1 == row.size());
        }
        writer.row_done();
      }
      writer.finish();
    }
  }
  return delta;
}

}  // namespace corridorkey::model
