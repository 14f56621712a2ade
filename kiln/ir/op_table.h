// The op table: one OpInfo per op in ir/ops.def, with arity, traits, accepted dtypes,
// attribute schema and the shape/dtype rule. The eager dispatcher, the gradient tape and
// (later) the tracer, verifier, printer, parser and codegen all key off this table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/tensor_type.h"

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_OP(e, name, arity, traits, dtypes, bf16, fusion, codegen, rounding, attrs, rule) e,
#include "kiln/ir/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(e, name, arity, traits, dtypes, bf16, fusion, codegen, rounding, attrs, rule) +1
#include "kiln/ir/ops.def"
#undef KILN_OP
    ;

// Op traits (bit flags).
enum OpTrait : uint32_t {
  kNone = 0,
  kElementwise = 1u << 0,      // output[i] depends only on inputs at i (after broadcasting)
  kReduction = 1u << 1,        // reduces over axes
  kCommutative = 1u << 2,      // f(a, b) == f(b, a)
  kSideEffecting = 1u << 3,    // must not be removed or reordered (variable updates)
  kRandom = 1u << 4,           // output depends on a seed input
  kLayout = 1u << 5,           // moves data without arithmetic
  kContraction = 1u << 6,      // matmul / convolution: library GEMM territory
  kTranscendental = 1u << 7,   // expensive per element (exp, log, tanh ...): never duplicate
  kNoGradient = 1u << 8,       // not differentiable (comparisons, argmax, random, one_hot)
  kWindow = 1u << 9,           // an output element reads a window of its input (max-pool):
                               // fuses as a loop op, never duplicated, never run flat
  kInternal = 1u << 10,        // emitted by the library itself (gradients, bookkeeping), not
                               // a user-facing op: the numpy-style Python API leaves it out
  kSelects = 1u << 11,         // its output is some of input 0's elements (slice, gather): it
                               // reads as many of them as it writes, however large input 0 is
  kRoundsOperands = 1u << 12,  // a bf16 contraction whose fusion group may read an operand as
                               // a cast of a float32 value (operand_prologue.h): the runtime
                               // rounds the float32 values where it reads them (a GEMM as it
                               // packs them), never storing the bf16 copy in the arena
};
// The trait names of a `traits` bit set, in bit order ("elementwise", "reduction", ...,
// "side-effecting", "no-gradient", "internal", "selects", "rounds-operands"): `kiln ops` and
// Python's kiln.op_table() print them.
std::vector<std::string_view> trait_names(uint32_t traits);

// Which input dtypes an op accepts.
enum class DTypeClass : uint8_t { Float, Numeric, Bool, Any };
bool dtype_in_class(DType t, DTypeClass c);
std::string_view dtype_class_description(DTypeClass c);
// The ops.def column's word for a dtype class: "float", "numeric", "bool", "any".
std::string_view dtype_class_word(DTypeClass c);
// The attribute schema's word for a kind (ir/ops.def): "int", "float", "bool", "str", "ints",
// "dtype"; schema_kind_of is its inverse (nullopt for another word).
std::string_view schema_kind_word(AttrKind k);
std::optional<AttrKind> schema_kind_of(std::string_view word);

// What an op does with bfloat16 (the `bf16` column of ir/ops.def; the rule is in its header).
enum class Bf16Rule : uint8_t {
  Bytes,    // moves or selects bf16 values unchanged; the kernel handles 2-byte elements
  ViaF32,   // widened to float32, computed by the float32 kernel, each bf16 output rounded once
  Convert,  // the kernel converts to and from bf16 itself, one correct rounding (cast,
            // element_count)
  No,       // refused: infer_type throws kiln::Error naming the op and bfloat16
};
// The column's word: "bytes", "via-f32", "convert", "no".
std::string_view bf16_rule_word(Bf16Rule r);

// An op's role in a fusion group (the `fusion` column of ir/ops.def).
enum class FusionRole : uint8_t {
  NoFusion,     // never a member of a fusion group
  Loop,         // computed per output element where it is read (elementwise, broadcasts)
  Reduction,    // combines elements along axes (sum, max, softmax)
  Contraction,  // a GEMM or convolution a group forms around (its epilogue fuses)
  Output,       // starts a group and is one of its results, never read elementwise inside it:
                // concat along an axis whose pieces are not contiguous, each piece written
                // into its window of the result as the group computes it
};
// Whether codegen emits code for an op inside a kernel (the `codegen` column).
enum class Lowering : uint8_t {
  Generated,      // codegen/lower_kernel.cc has a rule for it
  RuntimeKernel,  // runs as the runtime's kernel (library GEMM, gather, random, ...)
};
std::string_view fusion_role_name(FusionRole r);

// How far a correct float implementation of an op may be off (the `rounding` column of
// ir/ops.def, with u the unit roundoff and y the result); tests/support/rounding_model.h turns
// it into the error bounds the tests derive. Every row names one: there is no default.
enum class RoundingClass : uint8_t {
  Exact,              // no rounding: selections, comparisons, layout, max / min, random numbers
  Rounded,            // one correct rounding: u |y| (mul, sqrt, a cast to a narrower float)
  Addition,           // u (|y| + |a| + |b|): an operand may be an unrounded product (FMA)
  TwoRoundings,       // 2u |y| (div computed as x * (1 / y), rsqrt)
  VectorMath,         // the vector-math allowance (docs/codegen.md): 6u |y| (exp, log, tanh ...)
  VectorMathOperand,  // 6u (|y| + |x|): an absolute floor where the formula cancels (gelu)
  Product,            // n u |y| for a product of n factors
  Accumulation,       // sums of n terms in any order: (1 + sqrt(n)) u op(|inputs|)
  Normalization,      // softmax, log_softmax, logsumexp: an exp or log plus a sum
  Decomposed,         // what its unfused decomposition may be off by (fused attention)
};
// The ops.def column's word for a rounding class, in kebab case: "exact", "rounded",
// "addition", "two-roundings", "vector-math", "vector-math-operand", "product", "accumulation",
// "normalization", "decomposed".
std::string_view rounding_class_word(RoundingClass r);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  // The C++ op API's default ("name:kind=default" in ir/ops.def); nullopt: required there.
  // The IR always spells every attribute out: a default never fills in a missing one.
  std::optional<AttrValue> default_value;
};

struct OpInfo;
// A shape/dtype rule: checks inputs and attributes, returns the output type, throws
// kiln::Error naming the op and the offending shapes/values otherwise.
using ShapeRule = TensorType (*)(const OpInfo& op, std::span<const TensorType> inputs,
                                 const Attrs& attrs);

struct OpInfo {
  OpKind kind;
  const char* name;
  int arity;  // -1: variadic (one or more)
  uint32_t traits;
  DTypeClass dtypes;
  Bf16Rule bf16;
  FusionRole fusion;
  Lowering codegen;
  RoundingClass rounding;
  std::vector<AttrSpec> attrs;
  ShapeRule rule;

  bool has(OpTrait t) const { return (traits & t) != 0; }
  bool generated() const { return codegen == Lowering::Generated; }
};

const OpInfo& op_info(OpKind kind);
inline const char* op_name(OpKind kind) { return op_info(kind).name; }
std::optional<OpKind> find_op(std::string_view name);
std::span<const OpInfo> all_ops();

// Checks arity, input dtypes and attributes against the table, then runs the shape rule.
// This is the single entry point every execution mode uses to type an op call.
TensorType infer_type(OpKind kind, std::span<const TensorType> inputs, const Attrs& attrs);

}  // namespace kiln
