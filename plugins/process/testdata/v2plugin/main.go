// Command v2plugin speaks only a future protocol version 2: the host must refuse it
// with a clear error at start.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/minfer/minfer/sdk/process"
)

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  process.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{process.ProtocolVersion + 1: {}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
