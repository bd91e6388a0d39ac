package cli

import "testing"

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
