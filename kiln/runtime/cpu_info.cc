// The host CPU's identity and caches (contract: cpu_info.h).
#include "kiln/runtime/cpu_info.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln::runtime {
namespace {

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
#if defined(__x86_64__) || defined(__i386__)
  if (!__get_cpuid_count(leaf, sub, &r.eax, &r.ebx, &r.ecx, &r.edx)) r = Regs{};
#else
  (void)leaf;
  (void)sub;
#endif
  return r;
}

unsigned max_leaf(unsigned base) { return cpuid(base).eax; }

std::string trim(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) || c == 0; };
  while (!s.empty() && space(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

void read_identity(CpuInfo& cpu) {
  const Regs v = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.ebx, 4);
  std::memcpy(vendor + 4, &v.edx, 4);
  std::memcpy(vendor + 8, &v.ecx, 4);
  cpu.vendor = trim(vendor);
  if (v.eax >= 1) {
    const unsigned sig = cpuid(1).eax;
    const int base_family = int((sig >> 8) & 0xF), base_model = int((sig >> 4) & 0xF);
    cpu.family = base_family == 0xF ? base_family + int((sig >> 20) & 0xFF) : base_family;
    cpu.model = base_family == 0x6 || base_family == 0xF
                    ? (int((sig >> 16) & 0xF) << 4) + base_model
                    : base_model;
    cpu.stepping = int(sig & 0xF);
  }
  if (max_leaf(0x80000000) >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    cpu.model_name = trim(brand);
  }
  if (cpu.model_name.empty()) cpu.model_name = "unknown model";
}

void read_features(CpuInfo& cpu) {
#if defined(__x86_64__) || defined(__i386__)
  // The ISAs the GEMM kernels use: __builtin_cpu_supports also checks that the OS saves the
  // registers' state.
  __builtin_cpu_init();
  cpu.avx2 = __builtin_cpu_supports("avx2");
  cpu.fma = __builtin_cpu_supports("fma");
  cpu.avx512f = __builtin_cpu_supports("avx512f");
  if (max_leaf(0) >= 7) {
    cpu.avx512_bf16 = cpu.avx512f && (cpuid(7, 1).eax & (1u << 5)) != 0;
    cpu.amx_bf16 = (cpuid(7, 0).edx & (1u << 22)) != 0;
  }
#else
  (void)cpu;
#endif
}

// Reads a whole small sysfs file; "" when missing.
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return trim(s.str());
}

// "32K", "1024K", "36608K", "2M" -> bytes; 0 when unreadable.
int64_t parse_size(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return 0;
  size_t used = 0;
  const long long value = std::stoll(text, &used);
  const char unit =
      used < text.size() ? char(std::toupper(static_cast<unsigned char>(text[used]))) : 'B';
  const int64_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
  return int64_t(value) * scale;
}

// "0-1,4,6-7" -> 5.
int count_cpus(const std::string& list) {
  int count = 0;
  std::stringstream s(list);
  std::string item;
  while (std::getline(s, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    try {
      if (dash == std::string::npos)
        count += 1;
      else
        count += std::stoi(item.substr(dash + 1)) - std::stoi(item.substr(0, dash)) + 1;
    } catch (const std::exception&) {
      return 1;
    }
  }
  return std::max(count, 1);
}

bool read_sysfs_caches(CpuInfo& cpu) {
  bool any = false;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    const std::string level = read_text(dir + "level"), type = read_text(dir + "type");
    if (level.empty()) break;
    CacheLevel c;
    c.bytes = parse_size(read_text(dir + "size"));
    const std::string ways = read_text(dir + "ways_of_associativity");
    c.ways =
        ways.empty() || !std::isdigit(static_cast<unsigned char>(ways[0])) ? 0 : std::stoi(ways);
    c.shared_by = count_cpus(read_text(dir + "shared_cpu_list"));
    if (c.bytes <= 0) continue;
    if (level == "1" && type == "Data") cpu.l1d = c, any = true;
    if (level == "2" && type != "Instruction") cpu.l2 = c, any = true;
    if (level == "3" && type != "Instruction") cpu.l3 = c, any = true;
  }
  return any && cpu.l1d.bytes > 0 && cpu.l2.bytes > 0;
}

// CPUID's deterministic cache parameters: Intel leaf 4, AMD leaf 0x8000001D (same layout).
bool read_cpuid_caches(CpuInfo& cpu) {
  unsigned leaf = 4;
  if (cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine") {
    if (max_leaf(0x80000000) < 0x8000001D) return false;
    leaf = 0x8000001D;
  } else if (max_leaf(0) < 4) {
    return false;
  }
  bool any = false;
  for (unsigned sub = 0; sub < 16; ++sub) {
    const Regs r = cpuid(leaf, sub);
    const unsigned type = r.eax & 0x1F;
    if (type == 0) break;
    const unsigned level = (r.eax >> 5) & 0x7;
    CacheLevel c;
    c.ways = int((r.ebx >> 22) & 0x3FF) + 1;
    const int64_t partitions = int64_t((r.ebx >> 12) & 0x3FF) + 1;
    const int64_t line = int64_t(r.ebx & 0xFFF) + 1, sets = int64_t(r.ecx) + 1;
    c.bytes = int64_t(c.ways) * partitions * line * sets;
    c.shared_by = int((r.eax >> 14) & 0xFFF) + 1;
    if (level == 1 && type == 1) cpu.l1d = c, any = true;  // type 1: data
    if (level == 2 && type != 2) cpu.l2 = c, any = true;   // type 2: instruction
    if (level == 3 && type != 2) cpu.l3 = c, any = true;
  }
  return any && cpu.l1d.bytes > 0 && cpu.l2.bytes > 0;
}

CpuInfo read_cpu() {
  CpuInfo cpu;
  read_identity(cpu);
  read_features(cpu);
  if (read_sysfs_caches(cpu)) {
    cpu.cache_source = "sysfs";
  } else if (CpuInfo c = cpu; read_cpuid_caches(c)) {
    cpu = c;
    cpu.cache_source = "cpuid";
  } else {
    cpu.l1d = {32 << 10, 8, 1};
    cpu.l2 = {1 << 20, 16, 1};
    cpu.l3 = {2 << 20, 16, 1};
    cpu.cache_source = "defaults";
  }
  if (cpu.l1d.ways <= 0) cpu.l1d.ways = 8;
  if (cpu.l3.bytes <= 0) cpu.l3 = {cpu.l2.bytes, cpu.l2.ways, 1};
  return cpu;
}

std::string bytes_text(int64_t b) {
  if (b >= (int64_t{1} << 20)) {
    const double mib = double(b) / double(1 << 20);
    return mib == double(int64_t(mib)) ? fmt::format("{} MiB", int64_t(mib))
                                       : fmt::format("{:.1f} MiB", mib);
  }
  return fmt::format("{} KiB", b >> 10);
}

}  // namespace

std::string CpuInfo::describe() const {
  std::string isa;
  for (auto [on, name] : {std::pair{avx512f, "avx512f"},
                          {avx512_bf16, "avx512_bf16"},
                          {amx_bf16, "amx_bf16"},
                          {avx2, "avx2"},
                          {fma, "fma"}})
    if (on) isa += std::string(isa.empty() ? "" : " ") + name;
  return fmt::format(
      "{} family {} model {} stepping {} ({}); L1d {} {}-way, L2 {}, L3 {} shared by {} ({}); {}",
      vendor, family, model, stepping, model_name, bytes_text(l1d.bytes), l1d.ways,
      bytes_text(l2.bytes), bytes_text(l3.bytes), l3.shared_by, cache_source,
      isa.empty() ? "no AVX2" : isa);
}

const CpuInfo& cpu_info() {
  static const CpuInfo cpu = read_cpu();
  return cpu;
}

std::string cpu_key(const CpuInfo& cpu) {
  std::string key = fmt::format("{}-{}-{}-{}-{}", cpu.vendor, cpu.family, cpu.model, cpu.stepping,
                                cpu.model_name);
  std::string out;
  for (char c : key) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    if (keep)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

}  // namespace kiln::runtime
