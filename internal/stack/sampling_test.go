package stack

import (
	"context"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/testpath"
)

// TestSpeculativeSamplingDistribution: with a draft, the first emitted token's
// distribution (decided by the sampler's accept/reject on a verify row) equals plain
// sampling's within sampling error: a two-sample chi-square test over the 8 candidates
// top_k keeps, fixed seeds.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	const n = 1000
	ctx := context.Background()
	cfg := config.Default()
	cfg.Model.Threads = 1
	cfg.Draft.Path = testpath.Path(t, "models", "stories260K.gguf") // draft = target: q is one-hot at its argmax
	cfg.Sampling.Temperature, cfg.Sampling.TopK, cfg.Sampling.TopP, cfg.Sampling.MinP = 1, 8, 1, 0
	st, err := Open(ctx, cfg, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prompt, err := st.Tok.Encode("Once upon a time, there was a little", true, false)
	if err != nil {
		t.Fatal(err)
	}
	first := func(depth config.Depth, seed uint64) int32 {
		c := *cfg
		c.Spec.Depth = depth
		c.Sampling.Seed = int64(seed)
		req, err := st.Request(ctx, &c, prompt)
		if err != nil {
			t.Fatal(err)
		}
		req.NPredict = 2 // room for a depth-1 round
		res, err := st.Sess.Generate(ctx, req)
		st.CloseRequest()
		if err != nil {
			t.Fatal(err)
		}
		if depth > 0 && res.Spec.Drafted == 0 {
			t.Fatal("no draft token in the first round")
		}
		return res.Tokens[0]
	}
	plain, spec := map[int32]int{}, map[int32]int{}
	for i := range uint64(n) {
		plain[first(0, 1000+i)]++
		spec[first(1, 90000+i)]++
	}
	chi2, df := 0.0, -1
	for id := range union(plain, spec) {
		a, b := float64(plain[id]), float64(spec[id])
		if a+b < 10 {
			continue // too rare for the chi-square approximation
		}
		chi2 += (a - b) * (a - b) / (a + b)
		df++
	}
	t.Logf("plain %v\nspeculative %v\nchi2 %.2f with %d degrees of freedom", plain, spec, chi2, df)
	if df < 2 {
		t.Fatalf("only %d categories: the test cannot tell distributions apart", df+1)
	}
	// 0.1% critical values of chi-square for df = 2…7
	crit := map[int]float64{2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32}[df]
	if chi2 > crit {
		t.Fatalf("chi2 %.2f > %.2f (df %d): speculative sampling changes the distribution", chi2, crit, df)
	}
}

func union(a, b map[int32]int) map[int32]bool {
	u := map[int32]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}
