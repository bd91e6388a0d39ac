package main

import (
	_ "embed"
	"fmt"

	"github.com/minfer/minfer/core/gguf"
)

// embeddedModel is stories260K (MIT; see assets/README.md), the model minfer runs when
// neither -m nor minfer.toml names one.
//
//go:embed assets/stories260K.gguf
var embeddedModel []byte

// embeddedName is how the embedded model is shown in messages.
const embeddedName = "embedded:stories260K"

// openEmbedded parses the embedded model (zero-copy over the binary's read-only data).
func openEmbedded() (*gguf.File, error) {
	f, err := gguf.Parse(embeddedModel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", embeddedName, err)
	}
	return f, nil
}
