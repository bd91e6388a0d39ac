package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

func TestTokenizeCLI(t *testing.T) {
	spm := testpath.Path(t, "models", "stories260K.gguf")
	qwen := testpath.Path(t, "tokenizer", "hf", "qwen3", "tokenizer.json")
	small := testpath.Path(t, "models", "trained", "tokenizer.json") // 4096 tokens: loads fast
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"json with BOS", "", []string{"tokenize", "-m", spm, "--json", "Hello"}, "[1,346,306,414]\n"},
		{"no-bos", "", []string{"tokenize", "-m", spm, "--json", "--no-bos", "Hello"}, "[346,306,414]\n"},
		{"ids", "", []string{"tokenize", "-m", spm, "--ids", "Hello"}, "[1, 346, 306, 414]\n"},
		{"pieces", "", []string{"tokenize", "-m", spm, "--no-bos", "Hi"}, "   320 -> ' H'\n   417 -> 'i'\n"},
		{"hf plain special text", "", []string{"tokenize", "--tokenizer", small, "--json", "<|endoftext|>"}, "[28,92,1319,1818,594,92,30]\n"},
		{"hf --special", "", []string{"tokenize", "--tokenizer", qwen, "--json", "--special", "<|im_start|>user"}, "[151644,872]\n"},
		{"stdin file", "Hello world", []string{"tokenize", "--tokenizer", small, "--json", "-f", "-"}, "[3666,317,297,3971]\n"},
		{"empty", "", []string{"tokenize", "--tokenizer", small, "--json", "-f", "-"}, "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatalf("%v (stderr %s)", err, stderr)
			}
			if out != tc.want {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func TestDetokenizeCLI(t *testing.T) {
	spm := testpath.Path(t, "models", "stories260K.gguf")
	small := testpath.Path(t, "models", "trained", "tokenizer.json")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"spm args", "", []string{"detokenize", "-m", spm, "1", "346", "306", "414"}, "<s> Hello"},
		{"spm no bos", "", []string{"detokenize", "-m", spm, "346", "306", "414"}, "Hello"},
		{"hf json list", "", []string{"detokenize", "--tokenizer", small, "[3666, 317, 297, 3971]"}, "Hello world"},
		{"stdin", "[0,3666,317]\n", []string{"detokenize", "--tokenizer", small, "-"}, "<|endoftext|>Hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatalf("%v (stderr %s)", err, stderr)
			}
			if out != tc.want {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func TestTemplateCLI(t *testing.T) {
	dir := t.TempDir()
	chat := filepath.Join(dir, "chat.json")
	if err := os.WriteFile(chat, []byte(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	qwen := testpath.Path(t, "tokenizer", "hf", "qwen3", "tokenizer.json")
	llama3 := testpath.Path(t, "tokenizer", "hf", "llama3", "tokenizer.json")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"qwen3 gen", "", []string{"template", "--tokenizer", qwen, "--messages", chat, "--add-generation-prompt"},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3", "", []string{"template", "--tokenizer", llama3, "--messages", chat},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"qwen3 tools no-thinking", `[{"type":"function","function":{"name":"f"}}]`, []string{"template", "--tokenizer", qwen, "--messages", chat, "--tools", "-", "--no-thinking", "--add-generation-prompt"},
			"<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"function\": {\"name\": \"f\"}, \"type\": \"function\"}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"builtin stdin", `[{"role":"user","content":"Hi"}]`, []string{"template", "--chat-template", "chatml", "--messages", "-", "--add-generation-prompt"},
			"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runCLI(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatalf("%v (stderr %s)", err, stderr)
			}
			if out != tc.want {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func TestTokenizerCLIErrors(t *testing.T) {
	spm := testpath.Path(t, "models", "stories260K.gguf")
	qwen := testpath.Path(t, "tokenizer", "hf", "qwen3", "tokenizer.json")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		errWant string
	}{
		{"tokenize no vocab", []string{"tokenize", "Hi"}, 2, "need -m"},
		{"tokenize both", []string{"tokenize", "-m", spm, "--tokenizer", qwen, "Hi"}, 2, "not both"},
		{"tokenize no text", []string{"tokenize", "-m", spm}, 2, "give the text"},
		{"tokenize missing file", []string{"tokenize", "-m", "/nonexistent.gguf", "Hi"}, 1, "nonexistent"},
		{"detokenize out of range", []string{"detokenize", "-m", spm, "1", "100000"}, 1, "out of range"},
		{"detokenize negative", []string{"detokenize", "-m", spm, "-5"}, 2, ""},
		{"detokenize garbage", []string{"detokenize", "-m", spm, "12x"}, 2, "not a token id"},
		{"template no messages", []string{"template", "--tokenizer", qwen}, 2, "--messages"},
		{"template unknown builtin", []string{"template", "--chat-template", "nope", "--messages", "x.json"}, 2, "unknown built-in"},
		{"template no chat template", []string{"template", "-m", spm, "--messages", "-"}, 1, "no chat template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, `[{"role":"user","content":"x"}]`, tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit code: got %d, want %d (err %v)", got, tc.code, err)
			}
			if tc.errWant != "" && (err == nil || !strings.Contains(err.Error(), tc.errWant)) {
				t.Fatalf("error %v, want it to mention %q", err, tc.errWant)
			}
		})
	}
}
