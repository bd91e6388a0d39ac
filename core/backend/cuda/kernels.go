package cuda

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/minfer/minfer/cuda/driver"
	"github.com/minfer/minfer/cuda/kernels"
)

// kernelNames lists every entry point per source file; Open fails if one is missing.
// The per-type ones come from the weight-type table (typeKernels).
func kernelNames() map[string][]string {
	m := map[string][]string{
		"quantize.cu":    {"quantize_q8"},
		"norm.cu":        {"rmsnorm", "add_rmsnorm"},
		"elementwise.cu": {"swiglu", "add", "add_bias"},
		"rope.cu":        {"rope_store", "rope_store_seqs"},
		"attn.cu": {"attn_part_f16", "attn_part_q8", "attn_combine", "attn_flash_f16_64", "attn_flash_f16_128",
			"attn_part_seqs_f16", "attn_part_seqs_q8", "attn_combine_seqs", "attn_part_grp_f16", "attn_part_grp_q8",
			"attn_part_seqs_grp_f16", "attn_part_seqs_grp_q8", "attn_partc_f16", "attn_partc_q8", "attn_partc_grp_f16",
			"attn_partc_grp_q8", "attn_partc_seqs_f16", "attn_partc_seqs_q8", "attn_partc_seqs_grp_f16", "attn_partc_seqs_grp_q8"},
		"topk.cu":     {"topk"},
		"rowstats.cu": {"rowstats_part", "rowstats_merge"},
		"gemm.cu":     {"gemm_f16w", "f16_from_f32", "act_round_q8_0", "act_round_q8_k"},
		"embed.cu":    nil,
		"mmvq.cu":     nil,
		"mmvk.cu":     nil,
		"mmvp.cu":     nil,
		"mmq.cu":      nil,
	}
	for src := range m {
		m[src] = append(m[src], typeKernels(src)...)
	}
	return m
}

// kernelSource is the source f as compiled: its embedded text, then the instantiation
// lines of the weight-type table (instances).
func kernelSource(f string) (driver.Source, error) {
	code, hdrs, err := kernels.Source(f)
	if err != nil {
		return driver.Source{}, err
	}
	if inst := instances(f); inst != "" {
		code = append(append(append([]byte(nil), code...), "\n// instances (core/backend/cuda/types.go)\n"...), inst...)
	}
	return driver.Source{Name: f, Code: code, Headers: hdrs}, nil
}

// loadKernels compiles every source (in parallel; NVRTC programs are independent) and
// loads the modules into the current context.
func (b *Backend) loadKernels(cacheDir string) error {
	names := kernelNames()
	for _, src := range kernels.Names() {
		if _, ok := names[src]; !ok {
			return fmt.Errorf("BUG: cuda: kernel source %s has no entry list", src)
		}
	}
	type result struct {
		bin []byte
		err error
	}
	files := kernels.Names()
	res := make([]result, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, err := kernelSource(f)
			if err != nil {
				res[i].err = err
				return
			}
			res[i].bin, res[i].err = driver.Compile(src, driver.CompileOptions{Arch: b.ctx.Props.Arch(), Defines: kernelDefines(f), CacheDir: cacheDir, Log: b.log})
		}()
	}
	wg.Wait()
	for i, f := range files {
		if res[i].err != nil {
			return res[i].err
		}
		m, err := driver.LoadModule(f, res[i].bin)
		if err != nil {
			return err
		}
		b.mods = append(b.mods, m)
		for _, k := range names[f] {
			fn, err := m.Function(k)
			if err != nil {
				return err
			}
			// The split-K kernels' shared memory grows with the cache's largest chunk
			// (4 bytes a position: 48 KB at about 390,000 positions for a head of 128):
			// let them take what the device allows beyond the 48 KB a launch gets
			// without asking.
			if strings.HasPrefix(k, "attn_part") {
				limit := max(48<<10, b.ctx.Props.SharedOptin)
				static, err := fn.StaticShared()
				if err == nil && limit > 48<<10 {
					err = fn.SetMaxDynamicShared(limit - static)
				}
				if err != nil {
					return fmt.Errorf("cuda: %s: %w", k, err)
				}
				if b.attnShared == 0 || limit-static < b.attnShared {
					b.attnShared = limit - static
				}
			}
			b.fns[k] = fn
		}
	}
	return nil
}

// launch enqueues kernel name; a failure is recorded.
func (b *Backend) launch(name string, grid, block driver.Dim3, shared int, args ...driver.Arg) {
	fn, ok := b.fns[name]
	if !ok {
		panic("BUG: cuda: no kernel " + name)
	}
	b.timedLaunch(name, func() { b.fail(b.l.Launch(b.stream, fn, grid, block, shared, args...)) })
}

// kernelDefines is the -D defines source f is compiled with: MINFER_MMQ_DEFINES
// (comma-separated NAME=VALUE) for mmq.cu, to compare variants of its kernels (launch
// bounds, pipelining) in one process without editing the source; none otherwise.
func kernelDefines(f string) []string {
	v := strings.TrimSpace(os.Getenv("MINFER_MMQ_DEFINES"))
	if f != "mmq.cu" || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
