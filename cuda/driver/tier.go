package driver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Tier is the set of kernel choices and thresholds for a family of devices. It is pure
// data: choosers in core/backend/cuda read it, nothing here touches a GPU.
type Tier struct {
	Name         string // "hopper"
	Major, Minor int    // lowest compute capability of the tier
	// MMVQMaxRows is the largest nt served by the mat-vec kernels (one launch for all
	// rows, weights streamed once). Beyond it the matmul loops the mat-vec kernel in
	// chunks of MMVQMaxRows rows (so every row keeps its single-row bits). 8 because the
	// kernels keep one accumulator per row in registers, and 8 rows × the unit loads fit
	// every tier's register file without spilling (llama.cpp's mmvq uses the same bound).
	MMVQMaxRows int
	// GEMMMinRows is the nt from which MatMul uses the tensor-core GEMM (weights
	// dequantized to an f16 copy, mma.sync) instead of mat-vec launches in chunks of
	// MMVQMaxRows. The GEMM's cost is flat up to its 128-token tile, the chunked mat-vec
	// cost grows by one chunk per 8 rows; on the H200 (14336 × 4096 weight) they meet near
	// nt = 32 (Q8_0: 170 µs mat-vec vs 191 µs GEMM at 64; Q4_K: 288 vs 279), so 40.
	// Tiers without their own measurement keep the same value.
	//
	// On sm_80+ tiers every nt below GEMMMinRows keeps the rows' single-row bits (the
	// mat-vec chunks, or the tensor-core kernel of MMQRows, which has their bits), so
	// there GEMMMinRows is the row identity bound plus one: 65, for IdentityRows 64 (issue
	// 18's goal); the GEMM's f16 rounding loses identity. Tiers other than Hopper were
	// not measured and take Hopper's MMQRows.
	GEMMMinRows int
	// MMQRows is, per quantized weight layout ("q4_k"), the nt below MMQAllRows at which
	// MatMul uses the int8 tensor-core kernel (mmq.cu: each weight unit unpacked once for
	// all the rows, the integer dots on mma.sync) instead of mat-vec launches of up to 8
	// rows; from MMQAllRows to GEMMMinRows - 1 a layout in the map always takes it. A
	// layout it leaves out, and every layout on a tier without it, keeps the mat-vec
	// (Turing has no m16n8k32 int8 mma). Both give every row the same bits, so this is a
	// speed choice only (see hopperMMQ for the measurement). A set, not a threshold: on
	// the 7B layer the mat-vec's cost steps with its launches (nt 8 takes two rows per
	// warp, 9 adds a launch), so the winner alternates between nt 4 and 10.
	MMQRows map[string]NTSet
	// MMVQWarps is the number of warps per mat-vec block; each warp owns one weight row.
	// 4 (128 threads) keeps enough blocks resident to saturate memory on every tier.
	MMVQWarps int
	// PairRows says, per mat-vec kernel, at which nt it takes two weight rows per warp
	// (mmvq_KERNELw), reading each unit of the activations once for both (see
	// RowPairs). Tiers without their own measurement keep one row per warp.
	PairRows RowPairs
	// AttnChunk is the fewest cache positions one attention block scores before the
	// combine step (split-K; a multiple of 32). A row seeing p positions spreads them
	// over up to AttnMaxSplits blocks of max(AttnChunk, p/AttnMaxSplits rounded up to 32)
	// positions: at decode, short contexts then use several blocks per head instead of
	// one block walking every position (32: 5 blocks per head at 140 positions).
	AttnChunk int
	// AttnPrefillChunk replaces AttnChunk for calls of GEMMMinRows rows or more
	// (prefill): there every row's splits write hd+2 partials each, and 32-position
	// chunks made pp512 10 % slower on the H200 than 256 (the rows are bitwise only below
	// GEMMMinRows anyway).
	AttnPrefillChunk int
	// AttnMaxSplits bounds the splits per (row, head); long contexts grow the chunk
	// instead, so the partials scratch stays nt × heads × AttnMaxSplits × (HeadDim+2).
	AttnMaxSplits int
	// AttnGroupRows is the fewest rows of a split-K attention launch that take the
	// grouped kernels (attn_part_grp_*: a block per KV head and split, each K and V
	// element loaded once for the query heads it serves, where attn_part loads it once
	// a head); fewer rows keep a block per query head, whose many blocks hide a short
	// context's latency. Both kernels give the same bits, so the threshold is a speed
	// choice only (see hopperAttnGroup for the measurement).
	AttnGroupRows int
	// TopKMaxK is the largest k computed on the device; larger k read whole rows back.
	TopKMaxK int
	// PDL launches kernels with programmatic dependent launch (griddepcontrol, compute
	// 9.0+): each kernel's launch overlaps the previous kernel, which matters when a
	// decode step is hundreds of small kernels (MINFER_NO_PDL=1 turns it off).
	PDL bool
	// MMA names the tensor-core instruction family a tiled GEMM would use.
	MMA string
	// Note says why the tier differs from its neighbours.
	Note string
}

// NTSet is a set of row counts nt (bit nt set: nt is in), for a tier's per-kernel
// choices; NTs builds one from ranges.
type NTSet uint16

// NTs is the set of nt from lo to hi, inclusive (an empty set when hi < lo).
func NTs(lo, hi int) NTSet {
	var s NTSet
	for nt := max(lo, 0); nt <= hi && nt < 16; nt++ {
		s |= 1 << nt
	}
	return s
}

// Has reports whether nt is in the set.
func (s NTSet) Has(nt int) bool { return nt >= 0 && nt < 16 && s&(1<<nt) != 0 }

// RowPairs holds, per mat-vec kernel with a two-row form (mmvq_KERNELw_nt; the
// backend's weight-type table names them), the nt at which the mat-vec takes two weight
// rows per warp. The activations of a unit are then loaded once for both rows, which
// halves their traffic through L1 (it exceeds the weights': an F16 unit is 16 bytes of
// weights against 32 of activations per row, a Q5_K unit 64 against 72), at the cost of
// half as many warps. Each row keeps its bits either way. The backend also keeps one row
// per warp for a launch too small to give every SM a block in pairs. A kernel the map
// leaves out keeps one row per warp.
//
// Hopper, measured on the H200 (docs/perf-cuda.md, v5): with two rows per warp at
// every nt, BenchmarkMatVec (14336 × 4096) takes 0.60-0.80 of the time for Q4_0,
// 0.62-0.97 for Q4_K, 0.69-0.94 for Q6_K, 0.63-0.95 for F16; but in whole models
// (`minfer bench`, `specbench` C_T) Q4_K and Q6_K at nt 1 cost 0.8-1.4% of a 7B
// Q4_K_M decode (the 18944-column FFN down has too few warps then), and Q8_0 lost at
// nt 2-3, so those stay at one row per warp. Since Q4_K takes two lanes per slice of
// its quants (ad9b5c5), its one-row kernel beats pairs at nt 1-7 (0.75-0.96 of the
// time), so Q4_K pairs only at nt 8. Q3_K and IQ4_XS (issue 25) pair at nt 1: 7B
// Q3_K_M tg128 406.7 against 399.6 t/s with one row per warp, IQ4_XS 386.2 against
// 374.4 (5db37c9); nt 2-8 were not measured and pair as Q4_0's units do.
type RowPairs map[string]NTSet

// MMQAllRows is the nt from which every layout of a tier's MMQRows takes the tensor-core
// kernel (NTSet's bound): on the H200 it cost 0.42-0.84 of the mat-vec launches at every
// nt measured from 16 to 64, for every type (BenchmarkMatMulLayer, perf-cuda.md v15).
const MMQAllRows = 16

// hopperMMQ is the Hopper tier's MMQRows: the nt below 16 where the tensor-core kernel
// (v15's: launch bounds per type and tiles, Q4_K's KScales staged) beat the mat-vec
// launches in BenchmarkMatMulLayer (one Qwen2.5-7B layer's seven matmuls, q/k/v and
// gate/up merged as in the model, four layers rotated; H200, perf-cuda.md v15; µs per
// layer, mat-vec / mmq), where v13's thresholds came from one 14336 × 4096 weight:
//   - Q4_0 from 4: 100.6 / 93.8 at 4, 146.8 / 98.3 at 8, 193.7 / 157.7 at 9; at 2-3 the
//     mat-vec (62.9 / 92.5, 73.3 / 93.1);
//   - Q5_0 from 7: 153.6 / 145.0 at 7; at 6 the mat-vec (142.9 / 145.0);
//   - Q8_0 from 4: 140.3 / 114.3 at 4, 217.1 / 121.5 at 8; at 3 the mat-vec (99.4 / 112.4);
//   - Q4_K at 7 (215.7 / 183.5) and from 9 (234.1 / 216.6, 299.7 / 223.2 at 12): at 8
//     the mat-vec takes two rows per warp (174.7 / 183.4), 6 is a tie (181.3 / 181.0,
//     left to the mat-vec), 2-5 the mat-vec (78.2 / 167.7 … 173.0 / 178.3);
//   - Q6_K at 4 (164.1 / 139.1), 6-8 (147.3 / 145.7 at 6, 181.9 / 151.9 at 8) and from
//     10 (269.1 / 266.9, 341.8 / 271.5 at 12); at 5 the mat-vec takes pairs (135.8 /
//     142.4), at 9 it adds a one-row launch to them (246.7 / 264.5);
//   - Q5_K was not in the layer benchmark: from 6 as in v13 (BenchmarkMatMul 14336 ×
//     4096: 36.0 / 32.0 µs at 6, 29.4 / 29.2 at 4).
//
// From 16 rows every type took mmq: 0.42-0.84 of the mat-vec at nt 16-64 (MMQAllRows).
var hopperMMQ = map[string]NTSet{
	"q4_0": NTs(4, 15), "q5_0": NTs(7, 15), "q8_0": NTs(4, 15),
	"q4_k": NTs(7, 7) | NTs(9, 15), "q5_k": NTs(6, 15), "q6_k": NTs(4, 4) | NTs(6, 8) | NTs(10, 15),
}

// hopperAttnGroup is AttnGroupRows on every tier (measured on the H200 only: 7B
// Q4_K_M, `minfer bench -p 1,2,4,8,16,32,64 -n 32 -d 0,512,2048` with
// MINFER_NO_ATTN_GROUP=1 and MINFER_ATTN_GROUP=all, perf-cuda.md v17): grouped, the
// forwards of 32 and 64 rows were 1-6% faster at every depth, those of 16 rows 3% faster
// at depth 0 and 2-4% slower at 512-2,048, those of 1-8 rows up to 35% slower (decode at
// 2,048 positions: tg32 234 against 363 t/s).
const hopperAttnGroup = 32

// hopperPairs is the Hopper tier's RowPairs (see RowPairs for the measurement).
var hopperPairs = RowPairs{
	"q4_0": NTs(1, 8), "q5_0": NTs(1, 8), "q8_0": NTs(1, 1) | NTs(4, 8), "q4_k": NTs(8, 8),
	"q5_k": NTs(2, 8), "q6_k": NTs(2, 8), "f16v": NTs(1, 8),
	"q3_k": NTs(1, 8), "iq4_xs": NTs(1, 8),
}

// tiers is ordered by compute capability.
var tiers = []Tier{
	{Name: "turing", Major: 7, Minor: 5, MMVQMaxRows: 8, GEMMMinRows: 40, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k8.f16", Note: "oldest supported: dp4a and f16 mma; 64 KB shared per SM"},
	{Name: "ampere-dc", Major: 8, Minor: 0, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k16.f16", Note: "A100: cp.async, 164 KB shared, 40 MB L2"},
	{Name: "ampere", Major: 8, Minor: 6, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k16.f16", Note: "consumer Ampere: 100 KB shared, small L2"},
	{Name: "ada", Major: 8, Minor: 9, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k16.f16", Note: "Ada: fp8 mma, large L2"},
	{Name: "hopper", PDL: true, Major: 9, Minor: 0, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, PairRows: hopperPairs, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "wgmma.m64nNk16.f16 (sm_90a)", Note: "H100/H200: 132 SMs, 227 KB shared, TMA, 50-60 MB L2"},
	{Name: "blackwell-dc", PDL: true, Major: 10, Minor: 0, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "tcgen05.mma", Note: "B200: tensor memory, 2-CTA mma"},
	{Name: "blackwell", PDL: true, Major: 12, Minor: 0, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k16.f16", Note: "RTX 50xx: consumer Blackwell, no tcgen05"},
	{Name: "gb10", PDL: true, Major: 12, Minor: 1, MMVQMaxRows: 8, GEMMMinRows: 65, MMQRows: hopperMMQ, MMVQWarps: 4, AttnChunk: 32, AttnPrefillChunk: 256, AttnMaxSplits: 32, AttnGroupRows: hopperAttnGroup, TopKMaxK: 64,
		MMA: "mma.sync.m16n8k16.f16", Note: "DGX Spark GB10: unified LPDDR5x memory, ~270 GB/s"},
}

// Tiers returns a copy of the tier table, ordered by compute capability.
func Tiers() []Tier { return append([]Tier(nil), tiers...) }

// TierFor picks the tier of a device of compute capability major.minor: the highest
// tier at or below it. Devices older than Turing (7.5) are refused.
func TierFor(major, minor int) (Tier, error) {
	cc := major*10 + minor
	if cc < 75 {
		return Tier{}, fmt.Errorf("cuda: compute capability %d.%d is not supported (minfer needs 7.5, Turing, or newer)", major, minor)
	}
	best := tiers[0]
	for _, t := range tiers {
		if t.Major*10+t.Minor <= cc {
			best = t
		}
	}
	return best, nil
}

// TierByName finds a tier by name or by "major.minor".
func TierByName(s string) (Tier, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	for _, t := range tiers {
		if t.Name == s {
			return t, nil
		}
	}
	if maj, min, ok := strings.Cut(s, "."); ok {
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		if err1 == nil && err2 == nil {
			return TierFor(a, b)
		}
	}
	names := make([]string, len(tiers))
	for i, t := range tiers {
		names[i] = t.Name
	}
	return Tier{}, fmt.Errorf("cuda: unknown device tier %q (want one of %s, or a compute capability like 9.0)", s, strings.Join(names, ", "))
}

// SelectTier is TierFor(major, minor) unless override (usually $MINFER_DEVICE_TIER)
// names a tier, which then wins.
func SelectTier(major, minor int, override string) (Tier, error) {
	if strings.TrimSpace(override) != "" {
		t, err := TierByName(override)
		if err != nil {
			return Tier{}, fmt.Errorf("MINFER_DEVICE_TIER: %w", err)
		}
		return t, nil
	}
	return TierFor(major, minor)
}

// EnvTier is the MINFER_DEVICE_TIER override ("" when unset).
func EnvTier() string { return os.Getenv("MINFER_DEVICE_TIER") }
