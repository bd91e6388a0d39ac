package plugins

import (
	"context"
	"reflect"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/sdk"
)

// TestParams: a plugin's params are the settings of its roles that it reads (a
// built-in declares them; a file: or process: plugin is offered all), under its own
// [plugins.NAME] table; the registry hands them over as one JSON object.
func TestParams(t *testing.T) {
	doc := `
[spec]
depth = 3
[sampling]
penalty = "penalty"
temperature = 0.5
repeat_last_n = 32
[plugins.sampling]
params = { top_k = 5, extra = "x" }
[plugins.mine]
source = "process:./bin/mine"
params = { anything = 1, nested = { deep = [1, 2, 3], when = 1979-05-27T07:32:00Z } }
`
	c, err := config.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want string // the JSON the plugin gets
	}{
		{"sampling", `{"extra":"x","min_p":0.05,"temperature":0.5,"top_k":5,"top_p":0.95}`},
		{"penalty", `{"frequency_penalty":0,"presence_penalty":0,"repeat_last_n":32,"repeat_penalty":1}`},
		{"static", `{"depth":3,"draft_max":16,"min_conf":0}`},
		{"ucb", `{}`},
		{"mine", `{"anything":1,"nested":{"deep":[1,2,3],"when":"1979-05-27T07:32:00Z"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Params(c, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(mustParams(c.Plugins[tc.name].Params, m)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := Params(c, "nope"); err == nil {
		t.Fatal("Params of an undeclared plugin: got no error")
	}

	// keep_cut reaches the policies that read it, and only those: ucb does not (it
	// rejects the key), a file: policy is offered it, as every setting of its role.
	c, err = config.Parse([]byte("[spec]\nmin_conf = 0.7\nkeep_cut = true\n[plugins.ext]\nsource = \"file:x.wasm\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy string
		want   map[string]any
	}{
		{"adaptive", map[string]any{"draft_max": 16, "min_conf": 0.7, "keep_cut": true}},
		{"ucb", map[string]any{"draft_max": 16, "min_conf": 0.7}},
		{"ext", map[string]any{"draft_max": 16, "min_conf": 0.7, "keep_cut": true}},
		{"greedy", map[string]any{}}, // not this config's policy, and it reads nothing
	} {
		c.Spec.Policy = tc.policy
		if got, err := Params(c, tc.policy); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("policy %s: got %v, %v, want %v", tc.policy, got, err, tc.want)
		}
	}
}

// TestRolesUCBWithKeepCut: [spec] keep_cut with the ucb policy starts a request (ucb
// reads no keep_cut; handed one, it failed to start with "unknown field").
func TestRolesUCBWithKeepCut(t *testing.T) {
	ctx := context.Background()
	c, err := config.Parse([]byte("[spec]\npolicy = \"ucb\"\nmin_conf = 0.5\nkeep_cut = true\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(ctx, c.Plugins, nil, WithNativeBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs, err := r.Roles(ctx, c, RolesOptions{Spec: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, err := rs.Policy.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 4}); err != nil {
		t.Fatal(err)
	}
}
