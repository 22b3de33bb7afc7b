// attention_fwd_wgmma (cuda/ops/attention_wgmma.cuh) on its own: accuracy of sampled rows against
// an FP32 reference (the contract row atol 0.05 + rtol 0.02 |ref|, as the share of it used), run
// to run bits, decode and chunked-prefill rows against the prefill rows bit for bit, and timings
// (median of 30, L2 flushed). A standalone probe, not part of the build; on the GPU machine:
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -o attention_probe \
//        tools/device/attention_probe.cu -lcuda
//   ./attention_probe [check|time|all] | repeat N | bwd | bwd1 (one backward per operand kind, for
//   ncu) | small (for compute-sanitizer)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../cuda/ops/attention_wgmma_bwd.cuh"
using namespace ws1cuda;
using attn::PvMode;
using bf16 = __nv_bfloat16;
#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      printf("ERR %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)
#define CS(x)                                                             \
  do {                                                                    \
    detgemm::Status s_ = (x);                                             \
    if (!s_) {                                                            \
      printf("ERR %s: %s %s\n", #x, s_.what, cudaGetErrorString(s_.error)); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

// Normal-ish values (sum of 4 uniforms), channel c of every row times `hot` where c % 64 == 7.
__global__ void fill(bf16* p, size_t n, unsigned seed, int d, float scale, float hot) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float acc = 0;
    for (int k = 0; k < 4; ++k) {
      unsigned h = (unsigned)(i * 4 + k) * 2654435761u ^ (seed * 0x9E3779B9u);
      h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15; h *= 0x27d4eb2du; h ^= h >> 16;
      acc += (h & 0xffffff) / 16777216.0f - 0.5f;
    }
    float v = acc * 1.7320508f * scale;
    if ((int)(i % d) % 64 == 7) v *= hot;
    p[i] = __float2bfloat16(v);
  }
}
__global__ void flush_k(int* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (int)i;
}

// FP32 reference of one row per block: (b, h, i) from the list; two passes over the visible keys.
__global__ void ref_rows(const bf16* q, const bf16* k, const bf16* v, const int* list, int n, int hq, int hkv, int sq,
                         int skv, float scale, float* out) {
  const int idx = blockIdx.x;
  if (idx >= n) return;
  const int b = list[3 * idx], h = list[3 * idx + 1], i = list[3 * idx + 2];
  const int kvh = h / (hq / hkv), vis = min(max(i + skv - sq + 1, 0), skv);
  const bf16* qr = q + (((size_t)b * hq + h) * sq + i) * 128;
  const bf16* kb = k + ((size_t)b * hkv + kvh) * skv * 128;
  const bf16* vb = v + ((size_t)b * hkv + kvh) * skv * 128;
  extern __shared__ float sh[];  // scores [vis]
  __shared__ float red[256];
  for (int j = threadIdx.x; j < vis; j += blockDim.x) {
    float s = 0;
    for (int d = 0; d < 128; ++d) s = fmaf(__bfloat162float(qr[d]), __bfloat162float(kb[(size_t)j * 128 + d]), s);
    sh[j] = s * scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) mx = fmaxf(mx, sh[j]);
  red[threadIdx.x] = mx;
  __syncthreads();
  if (threadIdx.x == 0) { for (int t = 1; t < blockDim.x; ++t) mx = fmaxf(mx, red[t]); red[0] = mx; }
  __syncthreads();
  mx = red[0];
  __syncthreads();
  float sum = 0;
  for (int j = threadIdx.x; j < vis; j += blockDim.x) { sh[j] = expf(sh[j] - mx); sum += sh[j]; }
  red[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) { double s = 0; for (int t = 0; t < blockDim.x; ++t) s += red[t]; red[0] = (float)s; }
  __syncthreads();
  sum = red[0];
  if (threadIdx.x < 128) {
    double o = 0;
    for (int j = 0; j < vis; ++j) o += (double)sh[j] * __bfloat162float(vb[(size_t)j * 128 + threadIdx.x]);
    out[(size_t)idx * 128 + threadIdx.x] = vis > 0 ? (float)(o / sum) : 0.0f;
  }
}

struct Shape { int b, hq, hkv, sq, skv; };

struct Problem {
  Shape s;
  bf16 *q, *k, *v, *o;
  int* vis;
  void* ws = nullptr;  // attn::FwdWorkspace (V converted before the kernel)
  size_t nq, nkv;
  void alloc(Shape sh, float hot, unsigned seed) {
    s = sh;
    nq = (size_t)s.b * s.hq * s.sq * 128;
    nkv = (size_t)s.b * s.hkv * s.skv * 128;
    CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&o, nq * 2));
    CK(cudaMalloc(&k, nkv * 2)); CK(cudaMalloc(&v, nkv * 2));
    fill<<<1024, 256>>>(q, nq, seed, 128, 1.0f, hot);
    fill<<<1024, 256>>>(k, nkv, seed + 1, 128, 1.0f, hot);
    fill<<<1024, 256>>>(v, nkv, seed + 2, 128, 1.0f, hot);
    CK(cudaGetLastError());
    std::vector<int> hv((size_t)s.b * s.sq);
    for (int b = 0; b < s.b; ++b)
      for (int i = 0; i < s.sq; ++i) hv[(size_t)b * s.sq + i] = std::min(std::max(i + s.skv - s.sq + 1, 0), s.skv);
    CK(cudaMalloc(&vis, hv.size() * 4));
    CK(cudaMemcpy(vis, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
  }
  void free_all() { cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(vis); cudaFree(ws); ws = nullptr; }
  attn::FwdWorkspace workspace(bool pre) {
    if (pre && ws == nullptr) CK(cudaMalloc(&ws, attn::fwd_workspace_bytes(s.b, s.hkv, s.skv)));
    return attn::FwdWorkspace{pre ? ws : nullptr};
  }
  template <PvMode M, bool kOverlap = true, bool kPing = true>
  void launch(bool pre, float scale = 1.0f / sqrtf(128.0f)) {
    CS((attn::launch_attention_fwd<M, 3, kOverlap, kPing>(q, k, v, o, vis, s.b, s.hq, s.hkv, s.sq, s.skv, scale,
                                                         workspace(pre))));
  }
  // pre: V converted before the kernel (the default where fwd_wants_workspace says so).
  template <PvMode M, bool kOverlap = true, bool kPing = true>
  void run(int pre = -1) {
    CK(cudaMemset(o, 0xff, nq * 2));  // poison (NaN)
    launch<M, kOverlap, kPing>(pre < 0 ? attn::fwd_wants_workspace(s.hq, s.hkv, s.sq) : pre == 1);
    CK(cudaGetLastError());
  }
  std::vector<unsigned short> host_o() {
    std::vector<unsigned short> h(nq);
    CK(cudaMemcpy(h.data(), o, nq * 2, cudaMemcpyDeviceToHost));
    return h;
  }
};

float bf2f(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }

template <PvMode M>
void check(const char* name, Shape sh, float hot) {
  Problem P;
  P.alloc(sh, hot, 17);
  P.run<M>();
  CK(cudaDeviceSynchronize());
  auto o1 = P.host_o();
  P.run<M>();
  CK(cudaDeviceSynchronize());
  auto o2 = P.host_o();
  P.run<M, false, true>();
  CK(cudaDeviceSynchronize());
  auto o3 = P.host_o();
  P.run<M, true, false>();
  CK(cudaDeviceSynchronize());
  auto o7 = P.host_o();
  P.run<M, false, false>();
  CK(cudaDeviceSynchronize());
  auto o4 = P.host_o();
  std::vector<unsigned short> o5 = o1, o6 = o1;  // V converted before / in the kernel
  if (M == PvMode::kFp16) {
    P.run<M>(1);
    CK(cudaDeviceSynchronize());
    o5 = P.host_o();
    P.run<M>(0);
    CK(cudaDeviceSynchronize());
    o6 = P.host_o();
  }
  size_t diff = 0, nan = 0, plain = 0;
  for (size_t i = 0; i < o1.size(); ++i) {
    diff += o1[i] != o2[i];
    plain += (o1[i] != o3[i]) + (o1[i] != o4[i]) + (o1[i] != o5[i]) + (o1[i] != o6[i]) + (o1[i] != o7[i]);
    nan += std::isnan(bf2f(o1[i]));
  }
  // sampled rows against the FP32 reference
  std::vector<int> list;
  unsigned st = 12345;
  for (int n = 0; n < 384; ++n) {
    st = st * 1103515245u + 12345u;
    const int b = (st >> 8) % sh.b; st = st * 1103515245u + 12345u;
    const int h = (st >> 8) % sh.hq; st = st * 1103515245u + 12345u;
    int i = (st >> 8) % sh.sq;
    if (n < 8) i = std::max(0, sh.sq - 1 - n);  // the longest rows
    list.insert(list.end(), {b, h, i});
  }
  int* dl; float* dref;
  const int nrows = (int)list.size() / 3;
  CK(cudaMalloc(&dl, list.size() * 4)); CK(cudaMalloc(&dref, (size_t)nrows * 128 * 4));
  CK(cudaMemcpy(dl, list.data(), list.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(ref_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, sh.skv * 4));
  ref_rows<<<nrows, 256, sh.skv * 4>>>(P.q, P.k, P.v, dl, nrows, sh.hq, sh.hkv, sh.sq, sh.skv, 1.0f / sqrtf(128.0f), dref);
  CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  std::vector<float> ref((size_t)nrows * 128);
  CK(cudaMemcpy(ref.data(), dref, ref.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0, maxabs = 0;
  for (int r = 0; r < nrows; ++r) {
    const size_t row = ((size_t)list[3 * r] * sh.hq + list[3 * r + 1]) * sh.sq + list[3 * r + 2];
    for (int d = 0; d < 128; ++d) {
      const double c = bf2f(o1[row * 128 + d]), x = ref[(size_t)r * 128 + d];
      const double err = fabs(c - x);
      worst = std::max(worst, std::isnan(err) ? 1e30 : err / (0.05 + 0.02 * fabs(x)));
      maxabs = std::max(maxabs, err);
    }
  }
  printf("CHECK %-28s B%d Hq%d Hkv%d Sq%d Skv%d hot%g: run-to-run diff %zu, across schedules and V conversions diff %zu, "
         "NaN %zu, sampled rows %d: max|err| %.3g, worst share of allowance %.3f %s\n",
         name, sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, hot, diff, plain, nan, nrows, maxabs, worst,
         diff == 0 && plain == 0 && nan == 0 && worst <= 1.0 ? "OK" : "FAIL");
  // decode and chunked prefill rows against the prefill rows (Sq == Skv only): keys [0, n)
  // copied per kv head, the queries [n - sq2, n) of every head.
  if (sh.sq == sh.skv) {
    for (int n : {1, 127, 128, 129, 1000, sh.skv}) {
      if (n > sh.skv) continue;
      for (int sq2 : {1, 77}) {
        if (sq2 > n) continue;
        Problem D;
        D.s = Shape{sh.b, sh.hq, sh.hkv, sq2, n};
        D.nq = (size_t)sh.b * sh.hq * sq2 * 128;
        D.nkv = (size_t)sh.b * sh.hkv * n * 128;
        CK(cudaMalloc(&D.q, D.nq * 2)); CK(cudaMalloc(&D.o, D.nq * 2));
        CK(cudaMalloc(&D.k, D.nkv * 2)); CK(cudaMalloc(&D.v, D.nkv * 2));
        for (int bh = 0; bh < sh.b * sh.hkv; ++bh) {
          CK(cudaMemcpy(D.k + (size_t)bh * n * 128, P.k + (size_t)bh * sh.skv * 128, (size_t)n * 256, cudaMemcpyDeviceToDevice));
          CK(cudaMemcpy(D.v + (size_t)bh * n * 128, P.v + (size_t)bh * sh.skv * 128, (size_t)n * 256, cudaMemcpyDeviceToDevice));
        }
        for (int bh = 0; bh < sh.b * sh.hq; ++bh)
          CK(cudaMemcpy(D.q + (size_t)bh * sq2 * 128, P.q + ((size_t)bh * sh.sq + n - sq2) * 128, (size_t)sq2 * 256,
                        cudaMemcpyDeviceToDevice));
        std::vector<int> hv((size_t)sh.b * sq2);
        for (int b = 0; b < sh.b; ++b)
          for (int i = 0; i < sq2; ++i) hv[(size_t)b * sq2 + i] = i + n - sq2 + 1;
        CK(cudaMalloc(&D.vis, hv.size() * 4));
        CK(cudaMemcpy(D.vis, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
        D.run<M>();
        CK(cudaDeviceSynchronize());
        auto od = D.host_o();
        size_t bad = 0;
        for (int bh = 0; bh < sh.b * sh.hq; ++bh)
          for (int i = 0; i < sq2; ++i)
            for (int d = 0; d < 128; ++d)
              bad += od[((size_t)bh * sq2 + i) * 128 + d] != o1[((size_t)bh * sh.sq + n - sq2 + i) * 128 + d];
        printf("  rows [%d, %d) as Sq=%d against the %d-key cache: %zu elements differ %s\n", n - sq2, n, sq2, n, bad,
               bad ? "FAIL" : "OK");
        D.free_all();
      }
    }
  }
  cudaFree(dl); cudaFree(dref);
  P.free_all();
}

template <PvMode M, bool kOverlap = true, bool kPing = true>
void timeit(const char* name, Shape sh, bool pre = false) {
  Problem P;
  P.alloc(sh, 1.0f, 5);
  int* fl; const size_t fn = (size_t)64 << 20;  // 256 MiB
  CK(cudaMalloc(&fl, fn * 4));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int r = 0; r < 35; ++r) {
    flush_k<<<1024, 256>>>(fl, fn);
    CK(cudaEventRecord(a));
    P.launch<M, kOverlap, kPing>(pre, 0.0883883f);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 5) ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  const double med = ts[ts.size() / 2];
  double pairs = 0;  // visible (query, key) pairs per head
  for (int i = 0; i < sh.sq; ++i) pairs += std::min(std::max(i + sh.skv - sh.sq + 1, 0), sh.skv);
  const double flops = 4.0 * 128 * pairs * sh.hq * sh.b;
  const double bytes = 2.0 * (P.nq * 2 + P.nkv * 2);
  printf("TIME %-28s B%d Hq%d Hkv%d Sq%d Skv%d: median %.4f ms (min %.4f), %.1f TFLOP/s, %.2f TB/s of q,k,v,o\n", name,
         sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, med, ts.front(), flops / med / 1e9, bytes / med / 1e9);
  cudaFree(fl);
  P.free_all();
}

// The same launch `runs` times on one set of inputs (8192 tokens, outlier channels): how many
// outputs differ from the first, bit for bit.
void repeat(int runs) {
  Problem P;
  P.alloc(Shape{1, 32, 8, 8192, 8192}, 64.0f, 23);
  P.run<PvMode::kFp16>();
  CK(cudaDeviceSynchronize());
  const auto first = P.host_o();
  int differ = 0;
  for (int r = 1; r < runs; ++r) {
    P.run<PvMode::kFp16>();
    CK(cudaDeviceSynchronize());
    differ += P.host_o() != first;
  }
  printf("REPEAT fp16 (default schedule, V converted first) B1 Hq32 Hkv8 S8192 outlier x64: %d runs, %d differ from the first %s\n", runs,
         differ, differ ? "FAIL" : "OK");
  P.free_all();
}

// ---- The backward ------------------------------------------------------------------------------

float bf(const bf16& x) { return __bfloat162float(x); }

struct Bwd {
  Problem P;
  bf16 *dout, *dq, *dk, *dv;
  int *kidx, *nvalid, *q0;
  void* stats;
  attn::BwdOperands ops = attn::BwdOperands::kFp16P;
  float dscale = 1.0f;  // dout's scale (hot < 0: -hot, with hot 1 for q, k, v)
  void alloc(Shape sh, float hot, unsigned seed) {
    if (hot < 0) dscale = -hot;
    P.alloc(sh, hot < 0 ? 1.0f : hot, seed);
    CK(cudaMalloc(&dout, P.nq * 2)); CK(cudaMalloc(&dq, P.nq * 2));
    CK(cudaMalloc(&dk, P.nkv * 2)); CK(cudaMalloc(&dv, P.nkv * 2));
    fill<<<1024, 256>>>(dout, P.nq, seed + 3, 128, dscale, 1.0f);
    std::vector<int> ki((size_t)sh.b * sh.skv), nv(sh.b, sh.skv), z(sh.b, std::max(sh.sq - sh.skv, 0));
    for (size_t i = 0; i < ki.size(); ++i) ki[i] = (int)(i % sh.skv);
    CK(cudaMalloc(&kidx, ki.size() * 4)); CK(cudaMalloc(&nvalid, sh.b * 4)); CK(cudaMalloc(&q0, sh.b * 4));
    CK(cudaMemcpy(kidx, ki.data(), ki.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(nvalid, nv.data(), sh.b * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(q0, z.data(), sh.b * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&stats, attn::bwd_workspace_bytes(sh.b, sh.hq, sh.hkv, sh.sq)));  // the fp16 one (the larger)
  }
  // mode: 0 the default (the dq kernel's statistics pass), 2 the statistics given (in `stats`),
  // 4 dq alone, 5 dk/dv alone (the statistics given).
  void run(int mode = 0) {
    const Shape& s = P.s;
    CK(cudaMemset(dq, 0xff, P.nq * 2));
    CK(cudaMemset(dk, 0, P.nkv * 2));
    CK(cudaMemset(dv, 0, P.nkv * 2));
    const float sc = 1.0f / sqrtf(128.0f);
    CS(attn::launch_attention_bwd(P.q, P.k, P.v, dout, dq, dk, dv, P.vis, kidx, nvalid, q0, s.b, s.hq, s.hkv, s.sq,
                                  s.skv, sc, stats,
                                  mode == 0   ? attn::BwdRun::kAll
                                  : mode == 4 ? attn::BwdRun::kDqOnly
                                  : mode == 5 ? attn::BwdRun::kDkDvOnly
                                              : attn::BwdRun::kStatsGiven,
                                  nullptr, ops));
    CK(cudaGetLastError());
  }
  std::vector<unsigned short> get(const bf16* x, size_t n) {
    std::vector<unsigned short> h(n);
    CK(cudaMemcpy(h.data(), x, n * 2, cudaMemcpyDeviceToHost));
    return h;
  }
  std::vector<unsigned short> all() {
    auto a = get(dq, P.nq), b = get(dk, P.nkv), c = get(dv, P.nkv);
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  }
  void free_all() { P.free_all(); cudaFree(dout); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(kidx);
                    cudaFree(nvalid); cudaFree(q0); cudaFree(stats); }
};

// Gradients in double on the host (small shapes), judged by the contract row's shape
// (atol 0.05 + rtol 0.02 |ref|, atol times dout's scale) as the share of it used; bits across runs.
// Modes: 0 the default, 2 exact lse2 and dsum (double), 3 the default's lse2 with the exact dsum.
void bwd_check(const char* name, Shape sh, float hot, int mode = 0,
               attn::BwdOperands ops = attn::BwdOperands::kFp16P) {
  Bwd B;
  B.ops = ops;
  B.alloc(sh, hot, 31);
  B.run(0);
  CK(cudaDeviceSynchronize());
  auto first = B.all();
  B.run(0);
  CK(cudaDeviceSynchronize());
  const size_t differ = first != B.all();
  std::vector<bf16> q(B.P.nq), k(B.P.nkv), v(B.P.nkv), dout(B.P.nq);
  CK(cudaMemcpy(q.data(), B.P.q, B.P.nq * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(k.data(), B.P.k, B.P.nkv * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(v.data(), B.P.v, B.P.nkv * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(dout.data(), B.dout, B.P.nq * 2, cudaMemcpyDeviceToHost));
  const int D = 128, g = sh.hq / sh.hkv;
  const double scale = 1.0 / sqrt(128.0);
  std::vector<double> dq(B.P.nq, 0.0), dk(B.P.nkv, 0.0), dv(B.P.nkv, 0.0);
  const size_t nrows = B.P.nq / 128;
  std::vector<float> st(2 * nrows);  // lse2, dsum as the kernels take them
  CK(cudaMemcpy(st.data(), B.stats, st.size() * 4, cudaMemcpyDeviceToHost));
  for (int b = 0; b < sh.b; ++b)
    for (int h = 0; h < sh.hq; ++h) {
      const size_t kvb = ((size_t)b * sh.hkv + h / g) * sh.skv * D, qb = ((size_t)b * sh.hq + h) * sh.sq * D;
      for (int i = 0; i < sh.sq; ++i) {
        const int vis = std::min(std::max(i + sh.skv - sh.sq + 1, 0), sh.skv);
        std::vector<double> sc(vis), dp(vis);
        double mx = -1e300, l = 0, dsum = 0;
        for (int j = 0; j < vis; ++j) {
          double a = 0, c = 0;
          for (int d = 0; d < D; ++d) {
            a += (double)bf(q[qb + (size_t)i * D + d]) * bf(k[kvb + (size_t)j * D + d]);
            c += (double)bf(dout[qb + (size_t)i * D + d]) * bf(v[kvb + (size_t)j * D + d]);
          }
          sc[j] = a * scale;
          dp[j] = c;
          mx = std::max(mx, sc[j]);
        }
        for (int j = 0; j < vis; ++j) l += exp(sc[j] - mx);
        for (int j = 0; j < vis; ++j) dsum += exp(sc[j] - mx) / l * dp[j];
        const size_t row = ((size_t)b * sh.hq + h) * sh.sq + i;
        if (mode == 2) st[row] = vis > 0 ? (float)((mx + log(l)) * 1.4426950408889634) : INFINITY;
        if (mode >= 2) st[nrows + row] = (float)dsum;
        for (int j = 0; j < vis; ++j) {
          const double p = exp(sc[j] - mx) / l, ds = p * (dp[j] - dsum);
          for (int d = 0; d < D; ++d) {
            dq[qb + (size_t)i * D + d] += ds * scale * bf(k[kvb + (size_t)j * D + d]);
            dk[kvb + (size_t)j * D + d] += ds * scale * bf(q[qb + (size_t)i * D + d]);
            dv[kvb + (size_t)j * D + d] += p * bf(dout[qb + (size_t)i * D + d]);
          }
        }
      }
    }
  if (mode >= 2) {  // again with these statistics
    CK(cudaMemcpy(B.stats, st.data(), st.size() * 4, cudaMemcpyHostToDevice));
    B.run(2);
    CK(cudaDeviceSynchronize());
    first = B.all();
  }
  const auto judge = [&](const std::vector<unsigned short>& got, const std::vector<double>& ref, size_t off) {
    double worst = 0;
    size_t nan = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double c = bf2f(got[off + i]), err = fabs(c - ref[i]);
      if (std::isnan(c)) ++nan;
      worst = std::max(worst, std::isnan(err) ? 1e30 : err / (0.05 * B.dscale + 0.02 * fabs(ref[i])));
    }
    return std::make_pair(worst, nan);
  };
  const auto [wq, nq] = judge(first, dq, 0);
  const auto [wk, nk] = judge(first, dk, B.P.nq);
  const auto [wv, nv] = judge(first, dv, B.P.nq + B.P.nkv);
  const bool ok = differ == 0 && nq + nk + nv == 0 && wq <= 1 && wk <= 1 && wv <= 1;
  printf("BWD CHECK %-5s %-20s mode %d B%d Hq%d Hkv%d Sq%d Skv%d hot%g: run-to-run differ %zu, NaN %zu, worst share of allowance "
         "dq %.3f dk %.3f dv %.3f %s\n", ops == attn::BwdOperands::kFp16P ? "fp16" : "split", name, mode, sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, hot, differ, nq + nk + nv, wq, wk, wv,
         ok ? "OK" : "FAIL");
  B.free_all();
}

// The backward's median (memsets included), then with the statistics given (the dq kernel's
// second pass and dk/dv alone: the difference is the statistics pass).
void bwd_time(Shape sh, int repeats, attn::BwdOperands ops) {
  Bwd B;
  B.ops = ops;
  B.alloc(sh, 1.0f, 7);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  const auto median = [&](int mode) {
    std::vector<float> ts;
    for (int r = 0; r < 25; ++r) {
      CK(cudaEventRecord(a));
      B.run(mode);
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms; CK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 5) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  };
  const float full = median(0), given = median(2), dq_only = median(4), dkdv_only = median(5);
  B.run();
  const auto first = B.all();
  int differ = 0;
  for (int r = 0; r < repeats; ++r) {
    B.run();
    differ += B.all() != first;
  }
  double pairs = 0;
  for (int i = 0; i < sh.sq; ++i) pairs += std::min(std::max(i + sh.skv - sh.sq + 1, 0), sh.skv);
  const double flops = 10.0 * 128 * pairs * sh.hq * sh.b;  // 5 products of the usual count (recompute excluded)
  printf("BWD TIME %-5s B%d Hq%d Hkv%d Sq%d Skv%d: median %.4f ms (with memsets and the statistics pass), %.1f TFLOP/s "
         "(5 products); statistics given %.4f ms (dq alone %.4f, dk/dv alone %.4f); %d repeats, %d differ from the "
         "first %s\n", ops == attn::BwdOperands::kFp16P ? "fp16" : "split", sh.b, sh.hq, sh.hkv, sh.sq, sh.skv, full, flops / full / 1e9, given, dq_only, dkdv_only, repeats,
         differ, differ ? "FAIL" : "OK");
  B.free_all();
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  if (!strcmp(mode, "small")) {  // small shapes of every path, for compute-sanitizer
    check<PvMode::kFp16>("fp16 small", Shape{2, 8, 2, 300, 300}, 1.0f);
    check<PvMode::kFp16>("fp16 prefill (V converted first)", Shape{1, 8, 2, 200, 200}, 1.0f);
    check<PvMode::kFp16>("fp16 decode", Shape{2, 8, 2, 1, 300}, 1.0f);
    bwd_check("small", Shape{2, 8, 2, 300, 300}, 1.0f);
    bwd_check("chunk", Shape{1, 8, 2, 77, 400}, 1.0f);
    bwd_check("small split", Shape{2, 8, 2, 300, 300}, 1.0f, 0, attn::BwdOperands::kBf16Split);
    return 0;
  }
  if (!strcmp(mode, "bwd")) {
    for (const auto ops : {attn::BwdOperands::kFp16P, attn::BwdOperands::kBf16Split}) {
      bwd_check("tiny", Shape{1, 32, 8, 8, 8}, 1.0f, 0, ops);
      bwd_check("one query", Shape{1, 32, 8, 1, 32}, 1.0f, 0, ops);
      bwd_check("small", Shape{2, 8, 2, 300, 300}, 1.0f, 0, ops);
      bwd_check("chunk", Shape{1, 8, 2, 77, 400}, 1.0f, 0, ops);
      for (int m : {0, 2, 3}) bwd_check("outlier x64", Shape{1, 4, 1, 700, 700}, 64.0f, m, ops);
      bwd_check("outlier x64 gqa", Shape{1, 8, 2, 1000, 1000}, 64.0f, 0, ops);
      bwd_check("dout x1e-6", Shape{1, 8, 2, 1000, 1000}, -1e-6f, 0, ops);
      bwd_check("dout x1e4", Shape{1, 8, 2, 1000, 1000}, -1e4f, 0, ops);
    }
    for (const int s : {8192, 4096})
      for (const auto ops : {attn::BwdOperands::kFp16P, attn::BwdOperands::kBf16Split})
        bwd_time(Shape{1, 32, 8, s, s}, 5, ops);
    return 0;
  }
  if (!strcmp(mode, "bwd1")) {  // one backward of each operand kind at 8192 tokens (for ncu)
    for (const auto ops : {attn::BwdOperands::kFp16P, attn::BwdOperands::kBf16Split}) {
      Bwd B;
      B.ops = ops;
      B.alloc(Shape{1, 32, 8, 8192, 8192}, 1.0f, 7);
      B.run(0);
      CK(cudaDeviceSynchronize());
      B.free_all();
    }
    return 0;
  }
  if (!strcmp(mode, "repeat")) {
    repeat(argc > 2 ? atoi(argv[2]) : 100);
    return 0;
  }
  const bool chk = !strcmp(mode, "check") || !strcmp(mode, "all"), tim = !strcmp(mode, "time") || !strcmp(mode, "all");
  if (chk) {
    check<PvMode::kFp16>("fp16 small", Shape{2, 8, 2, 300, 300}, 1.0f);
    check<PvMode::kBf16Split>("split small", Shape{2, 8, 2, 300, 300}, 1.0f);
    check<PvMode::kFp16>("fp16 outlier x64", Shape{1, 32, 8, 2048, 2048}, 64.0f);
    check<PvMode::kBf16Split>("split outlier x64", Shape{1, 32, 8, 2048, 2048}, 64.0f);
    check<PvMode::kFp16>("fp16 v huge (x4096)", Shape{1, 8, 2, 512, 512}, 4096.0f);
    check<PvMode::kFp16>("fp16 decode", Shape{4, 32, 8, 1, 1000}, 1.0f);
    check<PvMode::kFp16>("fp16 8192", Shape{1, 32, 8, 8192, 8192}, 64.0f);
  }
  if (tim) {
    for (int s : {8192, 4096}) {
      timeit<PvMode::kFp16, false, true>("fp16 pre plain ping-pong", Shape{1, 32, 8, s, s}, true);
      timeit<PvMode::kFp16, false, false>("fp16 pre plain", Shape{1, 32, 8, s, s}, true);
      timeit<PvMode::kFp16, true, true>("fp16 pre overlap ping-pong", Shape{1, 32, 8, s, s}, true);
      timeit<PvMode::kFp16, true, false>("fp16 pre overlap", Shape{1, 32, 8, s, s}, true);
      timeit<PvMode::kFp16, false, true>("fp16 plain ping-pong", Shape{1, 32, 8, s, s});
      timeit<PvMode::kFp16, false, false>("fp16 plain", Shape{1, 32, 8, s, s});
      timeit<PvMode::kFp16, true, true>("fp16 overlap ping-pong", Shape{1, 32, 8, s, s});
      timeit<PvMode::kFp16, true, false>("fp16 overlap", Shape{1, 32, 8, s, s});
      timeit<PvMode::kBf16Split, false, true>("split plain ping-pong", Shape{1, 32, 8, s, s});
      timeit<PvMode::kBf16Split, false, false>("split plain", Shape{1, 32, 8, s, s});
    }
    timeit<PvMode::kFp16>("fp16 decode", Shape{32, 32, 8, 1, 4096});
    timeit<PvMode::kFp16>("fp16 decode pre", Shape{32, 32, 8, 1, 4096}, true);
    timeit<PvMode::kFp16>("fp16 chunk 128", Shape{8, 32, 8, 128, 4096});
    timeit<PvMode::kFp16>("fp16 chunk 128 pre", Shape{8, 32, 8, 128, 4096}, true);
    timeit<PvMode::kBf16Split>("split decode", Shape{32, 32, 8, 1, 4096});
  }
  return 0;
}
