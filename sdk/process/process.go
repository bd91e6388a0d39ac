// Package process makes an out-of-process minfer plugin: an ordinary executable that the
// engine starts (config source "process:PATH") and calls over gRPC through
// hashicorp/go-plugin, once per speculative round and role, with the same contract as a
// WebAssembly plugin (package sdk). A plugin binary is a few lines:
//
//	func main() {
//		process.Serve(process.Plugins{
//			Name:    "step",
//			Version: "1.0.0",
//			Policy: func(params []byte) (sdk.DepthPolicy, error) {
//				return newStepPolicy(params)
//			},
//		})
//	}
//
// Each role is a constructor: the host creates one instance per sequence (so a stateful
// policy never mixes two requests) and hands it the plugin's params table from
// minfer.toml as a JSON object. An instance is called by one goroutine at a time;
// different instances may be called concurrently. Every call carries the host's
// deadline in its context. An error or a panic in a call fails only that call, with the
// message sent to the host; the plugin process keeps serving.
//
// Running the binary by hand prints a notice and exits: only a host that knows the
// Handshake starts it.
//
// The package also holds the protocol the host (plugins/process) speaks: the handshake,
// the versioned plugin sets and the client stubs (Conn). It imports the standard
// library, go-plugin and gRPC only. PROTOCOL.md describes the protocol as bytes, for
// plugins in other languages.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/minfer/minfer/sdk"
)

// ProtocolVersion is the version of the plugin protocol (handshake, services, message
// layouts). A host and a plugin agree on it through go-plugin's version negotiation; a
// plugin built against another version is refused at start with a clear error.
const ProtocolVersion = 1

// ProtocolMinor is the minor version of protocol 1 this package speaks. Minors only
// add: 1 added Meta/Caps (the minor and the params declaration) and the policy
// request's batch fields, 2 the drafters' offers (sdk.RoundOutcome.Offered). A host learns a plugin's minor from Caps (0 when the plugin
// does not serve it) and writes each message as that minor reads it.
const ProtocolMinor = 2

// Handshake is the go-plugin handshake shared by host and plugins. The magic cookie is
// not security: it stops a plugin binary from being run by hand by mistake.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "MINFER_PLUGIN",
	MagicCookieValue: "5f0c2e7a-minfer-process-plugin",
}

// MaxMessageBytes bounds one gRPC message each way: a sampler asking for full rows gets
// vocabulary × rows × 8 bytes per round (152k × 17 × 8 ≈ 21 MB for Qwen).
const MaxMessageBytes = 512 << 20

// Plugins is what a plugin binary serves: a constructor per role it implements (nil =
// not served; at least one must be set). params is the plugin's params table from
// minfer.toml as a JSON object ("{}" when absent). A constructor error fails the host's
// request for an instance, with its message.
type Plugins struct {
	Name    string // shown in host messages and `minfer plugin list`
	Version string // the plugin's own version

	// Params are the keys of the params object the plugin reads, the role settings it
	// wants merged in among them (see sdk.Info.Params), when ParamsDeclared: the host
	// then merges only those settings and refuses a [plugins.NAME] params key outside
	// them, naming it. Without a declaration every setting and key is passed.
	Params         []string
	ParamsDeclared bool

	Policy  func(params []byte) (sdk.DepthPolicy, error)
	Sampler func(params []byte) (sdk.Sampler, error)
	Penalty func(params []byte) (sdk.Penalty, error)
	Drafter func(params []byte) (sdk.Drafter, error)
}

// Roles lists the roles p serves, in the order policy, sampler, penalty, drafter.
func (p Plugins) Roles() []sdk.Role {
	var roles []sdk.Role
	if p.Policy != nil {
		roles = append(roles, sdk.RolePolicy)
	}
	if p.Sampler != nil {
		roles = append(roles, sdk.RoleSampler)
	}
	if p.Penalty != nil {
		roles = append(roles, sdk.RolePenalty)
	}
	if p.Drafter != nil {
		roles = append(roles, sdk.RoleDrafter)
	}
	return roles
}

// Serve runs the plugin until the host closes it. It must be called from main and does
// not return normally (go-plugin exits the process when the host disconnects); it exits
// with status 1 when p serves no role or when the binary was not started by a host.
func Serve(p Plugins) {
	if len(p.Roles()) == 0 {
		fmt.Fprintln(os.Stderr, "minfer process plugin: Plugins sets no role (Policy, Sampler, Penalty or Drafter)")
		os.Exit(1)
	}
	plugin.Serve(serveConfig(p, nil))
}

func serveConfig(p Plugins, test *plugin.ServeTestConfig) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: serverSet(p)},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))
			return grpc.NewServer(opts...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "plugin", Level: hclog.Warn, Output: os.Stderr, JSONFormat: true,
		}),
		Test: test,
	}
}

// Plugin set keys: one per role plus "meta" (Info). A host dispenses "meta" first and
// then only the roles Info lists.
const metaKey = "meta"

// serverSet is the plugin set a binary serves: meta and the roles p implements.
func serverSet(p Plugins) plugin.PluginSet {
	s := &server{p: p}
	set := plugin.PluginSet{metaKey: &grpcPlugin{register: s.registerMeta}}
	for _, r := range p.Roles() {
		set[string(r)] = &grpcPlugin{register: func(g *grpc.Server) { s.registerRole(g, r) }}
	}
	return set
}

// ClientPlugins is the versioned plugin set a host passes to go-plugin
// (ClientConfig.VersionedPlugins). Dispensing any key returns a *Conn.
func ClientPlugins() map[int]plugin.PluginSet {
	set := plugin.PluginSet{metaKey: &grpcPlugin{}}
	for _, r := range []sdk.Role{sdk.RolePolicy, sdk.RoleSampler, sdk.RolePenalty, sdk.RoleDrafter} {
		set[string(r)] = &grpcPlugin{}
	}
	return map[int]plugin.PluginSet{ProtocolVersion: set}
}

// MetaKey is the plugin set key a host dispenses to reach Conn.Info.
const MetaKey = metaKey

// grpcPlugin adapts one entry of a plugin set to go-plugin.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	register func(*grpc.Server) // server side; nil on the host
}

func (g *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if g.register == nil {
		return errors.New("BUG: process: host plugin set served")
	}
	g.register(s)
	return nil
}

func (g *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &Conn{cc: cc}, nil
}

// server holds a plugin binary's instances.
type server struct {
	p    Plugins
	mu   sync.Mutex
	next uint64
	inst map[uint64]any // sdk.DepthPolicy, sdk.Sampler, sdk.Penalty or sdk.Drafter
}

func (s *server) add(v any) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil {
		s.inst = map[uint64]any{}
	}
	s.next++
	s.inst[s.next] = v
	return s.next
}

func (s *server) free(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inst, id)
}

// get returns instance id as a T.
func get[T any](s *server, id uint64, role sdk.Role) (T, error) {
	s.mu.Lock()
	v, ok := s.inst[id].(T)
	s.mu.Unlock()
	if !ok {
		return v, fmt.Errorf("no %s instance %d", role, id)
	}
	return v, nil
}
