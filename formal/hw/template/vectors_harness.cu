// Standalone harness for ptx-formal test vectors: runs every case of a hex vector file
// through ONE warp-level mma / mma.sp form on a CUDA GPU and writes a result file that
// `ptx-formal verify OPCODE VECTORS RESULTS` reads.  Nothing of ptx-formal is needed to
// build or run it.
//
//   nvcc -arch=sm_90 -o harness vectors_harness.cu
//   ./harness vectors.hex results.hex        # exit 0: all cases match the expected d
//                                            #      1: mismatches, 2: bad input, 3: CUDA error
//
// Vector file (one case per line; `ptx-formal vectors --help` has the full grammar):
//   OPCODE [sel=S] a=LANES b=LANES c=LANES [e=W|W|...] d=LANES  # id=N points=... why=...
//   LANES = 32 lanes separated by '|', each lane's registers separated by ',', in hex.
// Result file: one line per case, `OPCODE [sel=S] d=LANES # id=N`.
//
// Each warp of the grid runs one case: lane L loads its registers of a, b, c (and the
// metadata e) from global memory, executes the instruction, and stores d.
//
// The form-specific part sits between the BEGIN FORM / END FORM markers below;
// `ptx-formal vectors OPCODE --cuda FILE` writes this file with it filled in for OPCODE.
// By hand: the opcode string, the register counts, the register type (64-bit for .f64),
// the legal selectors, and one asm statement per selector.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// ===== BEGIN FORM =====
static const char* FORM_OPCODE = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
#define NA 4
#define NB 2
#define NC 4
#define ND 4
#define SPARSE 0
typedef uint32_t reg_t;
static const int SELECTORS[] = {0};

__device__ __forceinline__ void mma_sel0(const reg_t* a, const reg_t* b, const reg_t* c, reg_t* d, uint32_t e) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %11, %12, %13};"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]),
                 "r"(c[2]), "r"(c[3]));
}

__device__ __forceinline__ void mma_dispatch(int sel, const reg_t* a, const reg_t* b, const reg_t* c, reg_t* d,
                                             uint32_t e) {
  (void)sel;
  mma_sel0(a, b, c, d, e);
}
// ===== END FORM =====

static const int REG_HEX = (int)(2 * sizeof(reg_t));

__global__ void run_cases(const reg_t* A, const reg_t* B, const reg_t* C, const uint32_t* E, const int* SEL,
                          reg_t* D, int ncases) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  int w = tid / 32;             // the case (uniform across the warp)
  int lane = tid % 32;
  if (w >= ncases) return;
  reg_t a[NA], b[NB], c[NC], d[ND];
  size_t row = (size_t)w * 32 + lane;
  for (int i = 0; i < NA; ++i) a[i] = A[row * NA + i];
  for (int i = 0; i < NB; ++i) b[i] = B[row * NB + i];
  for (int i = 0; i < NC; ++i) c[i] = C[row * NC + i];
  uint32_t e = E[row];
  mma_dispatch(SEL[w], a, b, c, d, e);
  for (int i = 0; i < ND; ++i) D[row * ND + i] = d[i];
}

// ---------------------------------------------------------------------------------------
// host side: parse, run, write, compare

struct Case {
  int id = -1;
  int sel = 0;
  bool has_sel = false, has_d = false;
  std::vector<reg_t> a, b, c, d;
  std::vector<uint32_t> e;
};

static void die(int code, const std::string& msg) {
  fprintf(stderr, "harness: %s\n", msg.c_str());
  exit(code);
}

#define CUDA_CHECK(x)                                                             \
  do {                                                                            \
    cudaError_t err_ = (x);                                                       \
    if (err_ != cudaSuccess) die(3, std::string(#x) + ": " + cudaGetErrorString(err_)); \
  } while (0)

// "w,w,...|w,...|..." -> 32 lanes x n words
template <typename T>
static std::vector<T> parse_lanes(const std::string& s, int n, const std::string& where) {
  std::vector<T> out;
  std::stringstream lanes(s);
  std::string lane;
  int nl = 0;
  while (std::getline(lanes, lane, '|')) {
    std::stringstream words(lane);
    std::string wd;
    int nw = 0;
    while (std::getline(words, wd, ',')) {
      char* end = nullptr;
      unsigned long long v = strtoull(wd.c_str(), &end, 16);
      if (wd.empty() || *end != '\0') die(2, where + ": '" + wd + "' is not a hex word");
      out.push_back((T)v);
      ++nw;
    }
    if (nw != n) die(2, where + ": lane " + std::to_string(nl) + " has " + std::to_string(nw) + " words, expected " +
                            std::to_string(n));
    ++nl;
  }
  if (nl != 32) die(2, where + ": " + std::to_string(nl) + " lanes, expected 32");
  return out;
}

static std::string hex_lanes(const reg_t* x, int n) {
  std::string s;
  char buf[32];
  for (int l = 0; l < 32; ++l) {
    if (l) s += '|';
    for (int i = 0; i < n; ++i) {
      if (i) s += ',';
      snprintf(buf, sizeof buf, "%0*llx", REG_HEX, (unsigned long long)x[l * n + i]);
      s += buf;
    }
  }
  return s;
}

int main(int argc, char** argv) {
  if (argc != 3) die(2, "usage: harness VECTORS.hex RESULTS.hex");
  std::ifstream in(argv[1]);
  if (!in) die(2, std::string("cannot read ") + argv[1]);
  std::vector<Case> cases;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    std::string body = line.substr(0, hash), note = hash == std::string::npos ? "" : line.substr(hash + 1);
    std::stringstream toks(body);
    std::string op;
    if (!(toks >> op)) continue;  // blank or comment line
    std::string where = std::string(argv[1]) + ":" + std::to_string(lineno);
    if (op != FORM_OPCODE) die(2, where + ": case is for " + op + ", this harness runs " + FORM_OPCODE);
    Case cs;
    std::string t;
    while (toks >> t) {
      size_t eq = t.find('=');
      if (eq == std::string::npos) die(2, where + ": field '" + t.substr(0, 20) + "' is not name=value");
      std::string k = t.substr(0, eq), v = t.substr(eq + 1);
      if (k == "sel") { cs.sel = atoi(v.c_str()); cs.has_sel = true; }
      else if (k == "a") cs.a = parse_lanes<reg_t>(v, NA, where + " a");
      else if (k == "b") cs.b = parse_lanes<reg_t>(v, NB, where + " b");
      else if (k == "c") cs.c = parse_lanes<reg_t>(v, NC, where + " c");
      else if (k == "d") { cs.d = parse_lanes<reg_t>(v, ND, where + " d"); cs.has_d = true; }
      else if (k == "e") cs.e = parse_lanes<uint32_t>(v, 1, where + " e");
    }
    size_t idp = note.find("id=");
    if (idp != std::string::npos) cs.id = atoi(note.c_str() + idp + 3);
    if (cs.a.empty() || cs.b.empty() || cs.c.empty()) die(2, where + ": a case needs a=, b= and c=");
    if (SPARSE && cs.e.empty()) die(2, where + ": mma.sp needs e=");
    if (cs.e.empty()) cs.e.assign(32, 0);
    bool ok = false;
    for (int s : SELECTORS) ok |= (s == cs.sel);
    if (!ok) die(2, where + ": selector " + std::to_string(cs.sel) + " is not legal for this form");
    cases.push_back(cs);
  }
  int n = (int)cases.size();
  if (n == 0) die(2, std::string(argv[1]) + ": no cases");

  std::vector<reg_t> hA(n * 32 * NA), hB(n * 32 * NB), hC(n * 32 * NC), hD(n * 32 * ND);
  std::vector<uint32_t> hE(n * 32);
  std::vector<int> hS(n);
  for (int i = 0; i < n; ++i) {
    memcpy(&hA[i * 32 * NA], cases[i].a.data(), 32 * NA * sizeof(reg_t));
    memcpy(&hB[i * 32 * NB], cases[i].b.data(), 32 * NB * sizeof(reg_t));
    memcpy(&hC[i * 32 * NC], cases[i].c.data(), 32 * NC * sizeof(reg_t));
    memcpy(&hE[i * 32], cases[i].e.data(), 32 * sizeof(uint32_t));
    hS[i] = cases[i].sel;
  }
  reg_t *dA, *dB, *dC, *dD;
  uint32_t* dE;
  int* dS;
  CUDA_CHECK(cudaMalloc(&dA, hA.size() * sizeof(reg_t)));
  CUDA_CHECK(cudaMalloc(&dB, hB.size() * sizeof(reg_t)));
  CUDA_CHECK(cudaMalloc(&dC, hC.size() * sizeof(reg_t)));
  CUDA_CHECK(cudaMalloc(&dD, hD.size() * sizeof(reg_t)));
  CUDA_CHECK(cudaMalloc(&dE, hE.size() * sizeof(uint32_t)));
  CUDA_CHECK(cudaMalloc(&dS, hS.size() * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(reg_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(reg_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dC, hC.data(), hC.size() * sizeof(reg_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dE, hE.data(), hE.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dS, hS.data(), hS.size() * sizeof(int), cudaMemcpyHostToDevice));
  int threads = 128, blocks = (n * 32 + threads - 1) / threads;
  run_cases<<<blocks, threads>>>(dA, dB, dC, dE, dS, dD, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(hD.data(), dD, hD.size() * sizeof(reg_t), cudaMemcpyDeviceToHost));

  FILE* out = fopen(argv[2], "w");
  if (!out) die(2, std::string("cannot write ") + argv[2]);
  int bad = 0, compared = 0;
  for (int i = 0; i < n; ++i) {
    const reg_t* got = &hD[i * 32 * ND];
    fprintf(out, "%s", FORM_OPCODE);
    if (cases[i].has_sel) fprintf(out, " sel=%d", cases[i].sel);
    fprintf(out, " d=%s # id=%d\n", hex_lanes(got, ND).c_str(), cases[i].id >= 0 ? cases[i].id : i);
    if (!cases[i].has_d) continue;
    ++compared;
    for (int k = 0; k < 32 * ND; ++k) {
      if (got[k] != cases[i].d[k]) {
        if (bad < 5)
          fprintf(stderr, "case %d: lane %d reg %d: got %0*llx expected %0*llx\n",
                  cases[i].id >= 0 ? cases[i].id : i, k / ND, k % ND, REG_HEX, (unsigned long long)got[k], REG_HEX,
                  (unsigned long long)cases[i].d[k]);
        ++bad;
        break;
      }
    }
  }
  fclose(out);
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("%s: %d cases on %s (sm_%d%d), %d compared, %d mismatching -> %s\n", FORM_OPCODE, n, prop.name, prop.major,
         prop.minor, compared, bad, argv[2]);
  return bad ? 1 : 0;
}
