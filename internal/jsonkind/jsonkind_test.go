package jsonkind

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestOf(t *testing.T) {
	var p **int
	for _, tc := range []struct {
		v    any
		want string
	}{
		{0, "an integer"}, {uint8(0), "an integer"}, {int64(0), "an integer"},
		{0.5, "a number"}, {float32(0), "a number"},
		{"", "a string"}, {true, "a boolean"},
		{[]int{}, "an array"}, {[2]string{}, "an array"},
		{map[string]int{}, "an object"}, {struct{}{}, "an object"},
		{p, "an integer"}, // pointers are looked through
		{make(chan int), "another type"},
	} {
		if got := Of(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("Of(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestOfNamesWhatJSONRefused: the type json's own error reports is the one Of names in
// JSON's words (the use the server and the built-ins make of it).
func TestOfNamesWhatJSONRefused(t *testing.T) {
	var v struct {
		Depth int `json:"depth"`
	}
	err := json.Unmarshal([]byte(`{"depth": "4"}`), &v)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		t.Fatalf("want a type error, got %v", err)
	}
	if got := Of(te.Type); got != "an integer" || te.Value != "string" {
		t.Fatalf("got JSON %s, want %s", te.Value, got)
	}
}
