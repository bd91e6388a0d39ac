package builtin

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestDeclaredParams: every built-in declares exactly the keys its params struct takes,
// in the struct's order, and its Reads are among them. It catches a key added to a
// params struct and not to Plugins (plugin list would not show it and the host would
// refuse it at load) or declared and never read.
func TestDeclaredParams(t *testing.T) {
	seen := map[string][]string{}
	paramsDecoded = func(name string, dst any) { seen[name] = jsonKeys(reflect.TypeOf(dst).Elem()) }
	defer func() { paramsDecoded = nil }()
	for _, p := range Plugins {
		t.Run(p.Info.Name, func(t *testing.T) {
			var err error
			switch {
			case p.NewPolicy != nil:
				_, err = p.NewPolicy([]byte(`{}`))
			case p.NewSampler != nil:
				_, err = p.NewSampler([]byte(`{}`))
			case p.NewPenalty != nil:
				_, err = p.NewPenalty([]byte(`{}`))
			case p.NewDrafter != nil:
				_, err = p.NewDrafter([]byte(`{}`))
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := seen[p.Info.Name]
			if !ok {
				t.Fatalf("its constructor never called decodeParams(%q, …)", p.Info.Name)
			}
			if !p.Info.ParamsDeclared || !slices.Equal(p.Info.Params, got) {
				t.Errorf("declared params %v (declared %v), want its params struct's keys %v",
					p.Info.Params, p.Info.ParamsDeclared, got)
			}
			for _, k := range p.Reads {
				if !slices.Contains(p.Info.Params, k) {
					t.Errorf("reads setting %q, not among its declared params %v", k, p.Info.Params)
				}
			}
		})
	}
}

// jsonKeys lists the json tag names of struct type t's fields, in order.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// TestParamsOfTheWrongType: a params value of the wrong JSON type is named by its key
// and by JSON's words (before: "json: cannot unmarshal string into Go struct field
// .depth of type int").
func TestParamsOfTheWrongType(t *testing.T) {
	for _, tc := range []struct {
		name, params, want string
		make               func([]byte) error
	}{
		{"static depth", `{"depth":"x"}`, "static: params: depth: got JSON string, want an integer", func(b []byte) error { _, err := NewStatic(b); return err }},
		{"sampling top_p", `{"top_p":true}`, "sampling: params: top_p: got JSON bool, want a number", func(b []byte) error { _, err := NewSampling(b); return err }},
		{"suffix max_tokens", `{"max_tokens":1.5}`, "suffix: params: max_tokens: got JSON number 1.5, want an integer", func(b []byte) error { _, err := NewSuffix(b); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make([]byte(tc.params)); err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
