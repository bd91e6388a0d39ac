package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/minfer/minfer/internal/loadgen"
)

func init() {
	register(&command{
		name:    "loadgen",
		summary: "concurrent OpenAI-API load against any server: tokens/s, latency, TTFT, inter-token latency",
		run:     runLoadgen,
	})
}

const loadgenUsage = `
Usage: minfer loadgen [--url http://127.0.0.1:8080] [-c CLIENTS] [--requests N]
                      [-n MAX_TOKENS] [--stream] [--completions] [--system TEXT] [--json]

Sends chat completions (or text completions with --completions) to an OpenAI-compatible
server — minfer serve, llama-server, vLLM — from --clients concurrent clients, each
sending --requests requests one after another, every prompt distinct. Prints the
aggregate completion tokens per second (the sum of usage.completion_tokens over the
run's wall time), request latency percentiles and, with --stream, time to first token
and inter-token latency. Failed requests are counted and the first is quoted; the exit
status is 1 when every request failed.

The API key comes from --api-key-env (an environment variable's name, default
OPENAI_API_KEY) when that variable is set. --extra merges a JSON object into every
request body, e.g. '{"ignore_eos": true}' so llama-server generates all -n tokens.
--system starts every request with the same system prompt (with --completions, the
same first paragraph): what a server's prefix caching serves, e.g. minfer serve's
prefixes shared between slots; the rest of each prompt stays distinct.

Examples:
  minfer serve -m model.gguf --parallel 8 &
  minfer loadgen -c 8 --requests 4 -n 128
  minfer loadgen --url http://127.0.0.1:8081 -c 32 --requests 2 -n 128 --stream --json
  minfer loadgen --url http://127.0.0.1:8082 -c 8 -n 128 --extra '{"ignore_eos": true}'
  minfer loadgen -c 4 -n 64 --system "$(cat system-prompt.txt)"
`

func runLoadgen(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("loadgen", loadgenUsage)
	var (
		o             loadgen.Options
		extra, keyEnv string
		jsonOut       bool
	)
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server base `URL`")
	fs.IntVar(&o.Clients, "clients", 8, "concurrent clients")
	fs.IntVar(&o.Clients, "c", 8, "alias of --clients")
	fs.IntVar(&o.Requests, "requests", 4, "requests per client")
	fs.IntVar(&o.MaxTokens, "max-tokens", 128, "max_tokens of each request")
	fs.IntVar(&o.MaxTokens, "n", 128, "alias of --max-tokens")
	fs.Float64Var(&o.Temperature, "temp", 0, "temperature of each request")
	fs.BoolVar(&o.Stream, "stream", false, "stream the replies (measures TTFT and inter-token latency)")
	fs.BoolVar(&o.Completions, "completions", false, "send /v1/completions instead of /v1/chat/completions")
	fs.StringVar(&o.System, "system", "", "system prompt every request starts with (`TEXT`)")
	fs.StringVar(&o.Model, "model", "default", "the requests' model field")
	fs.StringVar(&keyEnv, "api-key-env", "OPENAI_API_KEY", "environment variable holding the API key")
	fs.StringVar(&extra, "extra", "", "JSON object merged into every request body")
	fs.DurationVar(&o.Timeout, "timeout", 0, "per-request timeout (default 10m)")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("loadgen: unexpected argument %q", rest[0])
	}
	if extra != "" {
		if err := json.Unmarshal([]byte(extra), &o.Extra); err != nil {
			return usagef("loadgen: --extra %q: want a JSON object: %v", extra, err)
		}
	}
	if o.Clients < 1 || o.Requests < 1 || o.MaxTokens < 1 {
		return usagef("loadgen: --clients, --requests and --max-tokens must be ≥ 1")
	}
	o.APIKey = os.Getenv(keyEnv)
	res, err := loadgen.Run(ctx, o)
	if err != nil {
		return usageError{Err: err}
	}
	if jsonOut {
		if err := json.NewEncoder(m.Stdout).Encode(res); err != nil {
			return err
		}
	} else {
		res.WriteText(m.Stdout)
	}
	if res.Errors == res.Requests {
		return fmt.Errorf("loadgen: every request failed: %s", res.FirstError)
	}
	return nil
}
