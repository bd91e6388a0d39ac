package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse: any document gives a config that validates or an *Error, never a panic.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../" + FileName); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"[model]\nkv = \"q4\"\n",
		"[spec]\ndepth = \"auto\"\n",
		"[plugins.x]\nsource = \"process:./x\"\nparams = { a = [1, { b = 2 }] }\n",
		"model.kv.x = 1\n[[server]]\n",
		"[plugins.\"a.b\"]\nsource = \"file:x\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "f.toml")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %q (%T) is not a *config.Error", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
	})
}
