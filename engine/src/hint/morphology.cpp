// Van Herk / Gil-Werman min and max filters (three comparisons per sample whatever the
// radius) and running-sum box blurs. Vertical passes walk whole rows at a time: a
// column-at-a-time pass over a 3840-wide float image misses the cache on every sample
// (each column visit touches a new 64-byte line), which made a 4K hint several times slower.
#include "hint/morphology.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>

namespace corridorkey::hint {
namespace {

/// out[i] = op over in[i - r .. i + r] along one axis, samples outside taking `identity`.
/// Works on `n` lines of `len` samples where consecutive samples of a line are `step`
/// apart and consecutive lines `stride` apart, `lanes` lines at once (vectorisable).
template <class Op>
void van_herk(float* a, int n, int lanes, std::ptrdiff_t along, std::ptrdiff_t across, int r,
              float identity, Op op) {
  if (r <= 0 || n <= 0) return;
  const int k = 2 * r + 1, m = n + 2 * r;  // padded length
  std::vector<float> g(static_cast<size_t>(m) * lanes), h(static_cast<size_t>(m) * lanes);
  auto P = [&](int j, int l) {
    const int i = j - r;
    return i < 0 || i >= n ? identity : a[i * along + l * across];
  };
  for (int j = 0; j < m; ++j) {
    float* gj = &g[static_cast<size_t>(j) * lanes];
    if (j % k == 0)
      for (int l = 0; l < lanes; ++l) gj[l] = P(j, l);
    else
      for (int l = 0; l < lanes; ++l) gj[l] = op(gj[l - lanes], P(j, l));
  }
  for (int j = m - 1; j >= 0; --j) {
    float* hj = &h[static_cast<size_t>(j) * lanes];
    if (j % k == k - 1 || j == m - 1)
      for (int l = 0; l < lanes; ++l) hj[l] = P(j, l);
    else
      for (int l = 0; l < lanes; ++l) hj[l] = op(hj[l + lanes], P(j, l));
  }
  for (int i = 0; i < n; ++i) {
    const float* hi = &h[static_cast<size_t>(i) * lanes];
    const float* gi = &g[static_cast<size_t>(i + 2 * r) * lanes];
    for (int l = 0; l < lanes; ++l) a[i * along + l * across] = op(hi[l], gi[l]);
  }
}

template <class Op>
void extreme_filter(std::vector<float>& a, int w, int h, int r, float identity, Op op) {
  if (r <= 0) return;
  for (int y = 0; y < h; ++y)  // horizontal: one row (one lane) at a time
    van_herk(a.data() + static_cast<size_t>(y) * w, w, 1, 1, 0, r, identity, op);
  van_herk(a.data(), h, w, w, 1, r, identity, op);  // vertical: all columns as lanes
}

}  // namespace

void min_filter(std::vector<float>& a, int w, int h, int r) {
  extreme_filter(a, w, h, r, std::numeric_limits<float>::infinity(),
                 [](float x, float y) { return std::min(x, y); });
}

void max_filter(std::vector<float>& a, int w, int h, int r) {
  extreme_filter(a, w, h, r, -std::numeric_limits<float>::infinity(),
                 [](float x, float y) { return std::max(x, y); });
}

void box_blur3(std::vector<float>& a, int w, int h, int r) {
  if (r <= 0) return;
  const double inv = 1.0 / (2 * r + 1);
  std::vector<float> src;
  std::vector<double> sum;
  for (int pass = 0; pass < 3; ++pass) {
    // Horizontal, edges clamped.
    std::vector<float> line(static_cast<size_t>(w));
    for (int y = 0; y < h; ++y) {
      float* row = a.data() + static_cast<size_t>(y) * w;
      std::copy(row, row + w, line.begin());
      auto at = [&](int x) { return line[static_cast<size_t>(std::clamp(x, 0, w - 1))]; };
      double s = 0;
      for (int x = -r; x <= r; ++x) s += at(x);
      for (int x = 0; x < w; ++x) {
        row[x] = static_cast<float>(s * inv);
        s += at(x + r + 1) - at(x - r);
      }
    }
    // Vertical: a running sum per column, updated a row at a time.
    src = a;
    sum.assign(static_cast<size_t>(w), 0.0);
    auto row_of = [&](int y) { return src.data() + static_cast<size_t>(std::clamp(y, 0, h - 1)) * w; };
    for (int y = -r; y <= r; ++y) {
      const float* s = row_of(y);
      for (int x = 0; x < w; ++x) sum[static_cast<size_t>(x)] += s[x];
    }
    for (int y = 0; y < h; ++y) {
      float* out = a.data() + static_cast<size_t>(y) * w;
      const float* add = row_of(y + r + 1);
      const float* sub = row_of(y - r);
      for (int x = 0; x < w; ++x) {
        out[x] = static_cast<float>(sum[static_cast<size_t>(x)] * inv);
        sum[static_cast<size_t>(x)] += add[x] - sub[x];
      }
    }
  }
}

}  // namespace corridorkey::hint
