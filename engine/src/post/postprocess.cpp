#include "post/postprocess.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace corridorkey::post {
namespace {

cv::Mat as_mat(const Image& im) {  // shares memory
  return cv::Mat(im.height, im.width, CV_32FC(im.channels), const_cast<float*>(im.pixels.data()));
}

Image from_mat(const cv::Mat& m) {
  Image im;
  im.width = m.cols;
  im.height = m.rows;
  im.channels = m.channels();
  im.pixels.resize(static_cast<size_t>(m.total()) * m.channels());
  cv::Mat dst(m.rows, m.cols, m.type(), im.pixels.data());
  m.copyTo(dst);
  return im;
}

Image blank(int w, int h, int c) {
  Image im;
  im.width = w;
  im.height = h;
  im.channels = c;
  im.pixels.assign(static_cast<size_t>(w) * h * c, 0.f);
  return im;
}

/// fn(row_begin, row_end) over `rows`, split into `threads` bands run at once (the calling
/// thread takes the first). Small images stay on one thread: a thread start costs ~50 us.
template <typename F>
void parallel_rows(int rows, int cols, int threads, F&& fn) {
  const int n = std::clamp(threads, 1, 16);
  if (n == 1 || static_cast<int64_t>(rows) * cols < 256 * 1024) {
    fn(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  const int band = (rows + n - 1) / n;
  for (int i = 1; i < n && i * band < rows; ++i)
    pool.emplace_back([&, i] { fn(i * band, std::min(rows, (i + 1) * band)); });
  fn(0, std::min(rows, band));
  for (auto& t : pool) t.join();
}

}  // namespace

Image resize_lanczos(const Image& src, int width, int height) {
  if (src.width == width && src.height == height) return src;
  cv::Mat out;
  cv::resize(as_mat(src), out, cv::Size(width, height), 0, 0, cv::INTER_LANCZOS4);
  return from_mat(out.reshape(src.channels));
}

Image despeckle(const Image& alpha, int min_area) {
  const cv::Mat a = as_mat(alpha);
  cv::Mat binary = a > 0.5f;  // uint8 0/255
  cv::Mat labels, stats, centroids;
  const int n = cv::connectedComponentsWithStats(binary, labels, stats, centroids, 8, CV_32S);
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);
  for (int i = 1; i < n; ++i) keep[i] = stats.at<int>(i, cv::CC_STAT_AREA) >= min_area ? 255 : 0;
  cv::Mat mask(a.size(), CV_8U);
  for (int y = 0; y < a.rows; ++y) {
    const int* l = labels.ptr<int>(y);
    uint8_t* m = mask.ptr<uint8_t>(y);
    for (int x = 0; x < a.cols; ++x) m[x] = keep[l[x]];
  }
  const int k = 2 * kDespeckleDilation + 1, b = 2 * kDespeckleBlur + 1;
  cv::dilate(mask, mask, cv::getStructuringElement(cv::MORPH_ELLIPSE, cv::Size(k, k)));
  cv::GaussianBlur(mask, mask, cv::Size(b, b), 0);
  Image out = alpha;
  for (int y = 0; y < a.rows; ++y) {
    const uint8_t* m = mask.ptr<uint8_t>(y);
    float* o = out.pixels.data() + static_cast<size_t>(y) * a.cols;
    for (int x = 0; x < a.cols; ++x) o[x] *= static_cast<float>(m[x]) / 255.f;
  }
  return out;
}

Image despill(const Image& fg, float strength, int backing_channel, int threads) {
  Image out = fg;
  if (strength <= 0.f) return out;
  // Green: the reference's formula. Blue: the same with green and blue exchanged, which is
  // exactly what swapping the channels around the green despill computes.
  const int k = backing_channel == 2 ? 2 : 1, o = 3 - k;  // the backing's, the other one
  const size_t row = static_cast<size_t>(fg.width);
  parallel_rows(fg.height, fg.width, threads, [&](int y0, int y1) {
    for (size_t i = y0 * row; i < y1 * row; ++i) {
      float* p = out.pixels.data() + i * fg.channels;
      const float r = p[0], g = p[k], b = p[o];
      const float spill = std::max(g - (r + b) * 0.5f, 0.f);
      p[0] = r + strength * (spill * 0.5f);
      p[k] = g + strength * (-spill);
      p[o] = b + strength * (spill * 0.5f);
    }
  });
  return out;
}

Image to_linear(const Image& fg, int threads) {
  Image out = blank(fg.width, fg.height, 3);
  const size_t row = static_cast<size_t>(fg.width);
  parallel_rows(fg.height, fg.width, threads, [&](int y0, int y1) {
    for (size_t i = y0 * row; i < y1 * row; ++i)
      for (int c = 0; c < 3; ++c) out.pixels[i * 3 + c] = fg.pixels[i * fg.channels + c];
    srgb_to_linear_inplace(out.pixels.data() + y0 * row * 3, (y1 - y0) * row * 3);
  });
  return out;
}

Image premultiply_from_linear(const Image& lin, const Image& alpha, int threads) {
  Image out = blank(lin.width, lin.height, 4);
  const size_t row = static_cast<size_t>(lin.width);
  parallel_rows(lin.height, lin.width, threads, [&](int y0, int y1) {
    for (size_t i = y0 * row; i < y1 * row; ++i) {
      const float a = alpha.pixels[i];
      for (int c = 0; c < 3; ++c) out.pixels[i * 4 + c] = lin.pixels[i * 3 + c] * a;
      out.pixels[i * 4 + 3] = a;
    }
  });
  return out;
}

Image checker_comp_from_linear(const Image& lin, const Image& alpha, int threads) {
  Image out = blank(lin.width, lin.height, 3);
  const float dark = srgb_to_linear(kCheckerDark), light = srgb_to_linear(kCheckerLight);
  parallel_rows(lin.height, lin.width, threads, [&](int y0, int y1) {
    for (int y = y0; y < y1; ++y) {
      for (int x = 0; x < lin.width; ++x) {
        const size_t i = static_cast<size_t>(y) * lin.width + x;
        const float bg = ((x / kCheckerSize + y / kCheckerSize) % 2 == 0) ? dark : light;
        const float a = alpha.pixels[i];
        for (int c = 0; c < 3; ++c) out.pixels[i * 3 + c] = lin.pixels[i * 3 + c] * a + bg * (1.f - a);
      }
      linear_to_srgb_inplace(out.pixels.data() + static_cast<size_t>(y) * lin.width * 3,
                             static_cast<size_t>(lin.width) * 3);
    }
  });
  return out;
}

void despill_premultiply_comp(const Image& fg, const Image& alpha, float strength, int backing_channel,
                              Image* processed, Image* comp, int threads) {
  if (!processed && !comp) return;
  const int w = fg.width, h = fg.height, ch = fg.channels;
  // A buffer of the right size is reused as it is: every sample is written below.
  auto fit = [&](Image* im, int c) {
    if (im->width == w && im->height == h && im->channels == c &&
        im->pixels.size() == static_cast<size_t>(w) * h * c)
      return;
    *im = blank(w, h, c);
  };
  if (processed) fit(processed, 4);
  if (comp) fit(comp, 3);
  const float dark = srgb_to_linear(kCheckerDark), light = srgb_to_linear(kCheckerLight);
  const int k = backing_channel == 2 ? 2 : 1, o = 3 - k;  // as despill()
  parallel_rows(h, w, threads, [&](int y0, int y1) {
    std::vector<float> lin(static_cast<size_t>(w) * 3);
    for (int y = y0; y < y1; ++y) {
      const size_t row0 = static_cast<size_t>(y) * w;
      const float* src = fg.pixels.data() + row0 * ch;
      for (int x = 0; x < w; ++x) {  // despill(), the same expressions
        const float* p = src + static_cast<size_t>(x) * ch;
        float* q = lin.data() + static_cast<size_t>(x) * 3;
        if (strength <= 0.f) {
          q[0] = p[0], q[1] = p[1], q[2] = p[2];
          continue;
        }
        const float r = p[0], g = p[k], b = p[o];
        const float spill = std::max(g - (r + b) * 0.5f, 0.f);
        q[0] = r + strength * (spill * 0.5f);
        q[k] = g + strength * (-spill);
        q[o] = b + strength * (spill * 0.5f);
      }
      srgb_to_linear_inplace(lin.data(), lin.size());
      const float* a_row = alpha.pixels.data() + row0;
      if (processed) {
        float* out = processed->pixels.data() + row0 * 4;
        for (int x = 0; x < w; ++x) {
          const float a = a_row[x];
          for (int c = 0; c < 3; ++c) out[x * 4 + c] = lin[static_cast<size_t>(x) * 3 + c] * a;
          out[x * 4 + 3] = a;
        }
      }
      if (comp) {
        float* out = comp->pixels.data() + row0 * 3;
        for (int x = 0; x < w; ++x) {
          const float bg = ((x / kCheckerSize + y / kCheckerSize) % 2 == 0) ? dark : light;
          const float a = a_row[x];
          for (int c = 0; c < 3; ++c) out[x * 3 + c] = lin[static_cast<size_t>(x) * 3 + c] * a + bg * (1.f - a);
        }
        linear_to_srgb_inplace(out, static_cast<size_t>(w) * 3);
      }
    }
  });
}

Image premultiply_linear(const Image& fg, const Image& alpha) {
  Image out = blank(fg.width, fg.height, 4);
  const size_t n = static_cast<size_t>(fg.width) * fg.height;
  for (size_t i = 0; i < n; ++i) {
    const float a = alpha.pixels[i];
    for (int c = 0; c < 3; ++c) out.pixels[i * 4 + c] = srgb_to_linear(fg.pixels[i * fg.channels + c]) * a;
    out.pixels[i * 4 + 3] = a;
  }
  return out;
}

Image checker_comp(const Image& fg, const Image& alpha) {
  Image out = blank(fg.width, fg.height, 3);
  const float dark = srgb_to_linear(kCheckerDark), light = srgb_to_linear(kCheckerLight);
  for (int y = 0; y < fg.height; ++y)
    for (int x = 0; x < fg.width; ++x) {
      const size_t i = static_cast<size_t>(y) * fg.width + x;
      const float bg = ((x / kCheckerSize + y / kCheckerSize) % 2 == 0) ? dark : light;
      const float a = alpha.pixels[i];
      for (int c = 0; c < 3; ++c) {
        const float f = srgb_to_linear(fg.pixels[i * fg.channels + c]);
        out.pixels[i * 3 + c] = linear_to_srgb(f * a + bg * (1.f - a));
      }
    }
  return out;
}

}  // namespace corridorkey::post
