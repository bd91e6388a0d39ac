package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/minfer/minfer/cuda/kernels"
)

// TestKernelNamesExist checks, without a GPU, that every entry point Open looks up is
// declared in its source: literally (extern "C" __global__ void name) or through one of
// the instantiation macros (MMVQ(q4_k, …) makes mmvq_q4_k_1 … mmvq_q4_k_8, MMVQW(q4_k, …)
// mmvq_q4_kw_1 … mmvq_q4_kw_8).
func TestKernelNamesExist(t *testing.T) {
	macro := regexp.MustCompile(`(?m)(?:^|\) )(MMVQW?|EMBED|DEQUANT)\((\w+),`)
	names := kernelNames()
	for _, f := range kernels.Names() {
		code, _, err := kernels.Source(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(code)
		made := map[string]bool{}
		for _, m := range macro.FindAllStringSubmatch(src, -1) {
			switch m[1] {
			case "MMVQ", "MMVQW":
				for nt := 1; nt <= 8; nt++ {
					made[fmt.Sprintf("mmvq_%s%s_%d", m[2], strings.ToLower(strings.TrimPrefix(m[1], "MMVQ")), nt)] = true
				}
			case "EMBED":
				made["embed_"+m[2]] = true
			case "DEQUANT":
				made["dequant_f16_"+m[2]] = true
			}
		}
		list, ok := names[f]
		if !ok {
			t.Errorf("%s: no entry list in kernelNames", f)
		}
		for _, n := range list {
			if !made[n] && !strings.Contains(src, "void "+n+"(") && !strings.Contains(src, ") "+n+"(") {
				t.Errorf("%s: kernel %s is looked up but not declared", f, n)
			}
		}
	}
	for f := range names {
		if _, _, err := kernels.Source(f); err != nil {
			t.Errorf("kernelNames lists %s, which is not an embedded source", f)
		}
	}
}
