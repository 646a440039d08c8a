// Package faultproxy puts a Toxiproxy proxy, in process, between a test's
// client and a server (PostgreSQL, an S3 server), and switches network
// faults on and off: latency, a black hole from a given byte on (a silent
// connection: no data, no close, no reset), a reset, a bandwidth limit, a
// slicer. It is for tests.
package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy to one upstream.
type Proxy struct {
	p *toxiproxy.Proxy
}

var (
	serverOnce sync.Once
	server     *toxiproxy.ApiServer
)

func init() {
	toxics.Register("blackhole_after", new(blackholeAfter))
}

// Start starts a proxy on 127.0.0.1 to upstream (host:port); the test's
// end stops it.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	serverOnce.Do(func() {
		zerolog.SetGlobalLevel(zerolog.Disabled) // the toxics log through the global logger
		server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	})
	p := toxiproxy.NewProxy(server, t.Name()+"-"+upstream, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p}
}

// Addr is the proxy's host:port, to connect to instead of the upstream.
func (p *Proxy) Addr() string { return p.p.Listen }

// Port is the proxy's port.
func (p *Proxy) Port() string { return p.Addr()[strings.LastIndex(p.Addr(), ":")+1:] }

// Toxic is a fault: Type is a Toxiproxy toxic ("latency", "timeout",
// "reset_peer", "bandwidth", "slicer") or "blackhole_after" (this
// package's: Bytes pass, then nothing, never a close); Stream is
// "upstream" (client to server) or "downstream".
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Add switches the toxic on, for new and open connections.
func (p *Proxy) Add(t testing.TB, tx Toxic) {
	t.Helper()
	if tx.Toxicity == 0 {
		tx.Toxicity = 1
	}
	b, err := json.Marshal(tx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(b))); err != nil {
		t.Fatalf("faultproxy: adding %s: %v", tx.Name, err)
	}
}

// Remove switches the toxic off.
func (p *Proxy) Remove(t testing.TB, name string) {
	t.Helper()
	if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("faultproxy: removing %s: %v", name, err)
	}
}

// Clear switches every toxic off.
func (p *Proxy) Clear() { p.p.Toxics.ResetToxics(context.Background()) }

// String names the proxy and its upstream.
func (p *Proxy) String() string { return fmt.Sprintf("proxy %s to %s", p.Addr(), p.p.Upstream) }

// blackholeAfter passes Bytes bytes of each connection's stream, then
// drops everything and never closes: the silent connection, from a chosen
// byte on.
type blackholeAfter struct {
	Bytes int64 `json:"bytes"`
}

type blackholeState struct{ passed int64 }

func (b *blackholeAfter) NewState() any { return new(blackholeState) }

func (b *blackholeAfter) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*blackholeState)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if left := b.Bytes - st.passed; left > 0 {
				n := min(left, int64(len(c.Data)))
				stub.Output <- &stream.StreamChunk{Data: c.Data[:n], Timestamp: c.Timestamp}
				st.passed += n
			}
			// The rest falls into the hole.
		}
	}
}
