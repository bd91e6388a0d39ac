package cli

import (
	"flag"
	"testing"

	"github.com/minfer/minfer/core/config"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: "plain", `a\nb`: "a\nb", `\t\\\"\'`: "\t\\\"'", `\x41\x4a`: "AJ", `\q`: `\q`, `end\`: `end\`, `\x4`: `\x4`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIntList(t *testing.T) {
	l := IntList{Vals: []int{512}}
	for _, v := range []string{"64,128", "256"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.String(); got != "64,128,256" {
		t.Errorf("got %s, want 64,128,256 (the default replaced)", got)
	}
	if err := l.Set("1,x"); err == nil {
		t.Error("1,x: want an error")
	}
}

// TestFlagErrors: a bad flag value is one line naming the flag as typed and what it
// wants — the kind for the flag package's types, the parser's own words for minfer's.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "x"}, `t: -np "x": want an integer; 'minfer t --help' lists the flags`},
		{[]string{"--batch-depth", "3x"}, `t: --batch-depth "3x": batch_depth "3x": want "off", "auto" or an integer ≥ 0; 'minfer t --help' lists the flags`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.Int("np", 0, "")
		var d config.BatchDepth
		fs.Var(&d, "batch-depth", "")
		_, err := ParseFlags(fs, tc.args)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: got %v, want %s", tc.args, err, tc.want)
		}
	}
}
