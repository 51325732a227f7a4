package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// bigSize is the download the throughput figure moves.
const bigSize = 200 << 20

// networkBench measures ask mode against open mode in the same run: the
// throughput of a 200 MB download from a server on the host, and the time
// to the first byte of a small request (the proxy's set-up: the policy,
// the stream over the exec, the dial).
func networkBench(ctx context.Context, r *report) error {
	bin := os.Getenv("SHIRO_BIN")
	if bin == "" {
		return errors.New("SHIRO_BIN must name a static shiro binary (make bench sets it)")
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	gw, err := gateway(ctx, eng.API())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(gw, 0).String())
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/big" {
			fmt.Fprintln(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(bigSize))
		for range bigSize / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln) //nolint:errcheck // ends with Close below
	defer srv.Close()
	hp := ln.Addr().String()

	proxy := egress.New(egress.Config{Policy: egress.Policy{Allow: []egress.Rule{{Pattern: hp, Source: "bench"}}, HostAddrs: egress.LocalAddrs()}})
	open := func(network string, eg docker.Egress) (*docker.Sandbox, func(), error) {
		ws, err := os.MkdirTemp("", "shiro-bench-net-")
		if err != nil {
			return nil, nil, err
		}
		sb, err := eng.Open(ctx, docker.Reference(images.Tag()), docker.Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Network: network}, Workspace: ws, HelperBinary: bin, Egress: eg}})
		if err != nil {
			removeContainers(eng.API(), ws)
			os.RemoveAll(ws)
			return nil, nil, err
		}
		return sb, func() { sb.Close(); removeContainers(eng.API(), ws); os.RemoveAll(ws) }, nil
	}
	askSB, doneAsk, err := open(docker.NetworkAsk, proxy)
	if err != nil {
		return err
	}
	defer doneAsk()
	openSB, doneOpen, err := open(docker.NetworkOpen, nil)
	if err != nil {
		return err
	}
	defer doneOpen()

	download := func(sb *docker.Sandbox) (time.Duration, error) {
		out, err := runOut(ctx, sb, "curl -sS -o /dev/null -w '%{size_download} %{time_total}' http://"+hp+"/big")
		if err != nil {
			return 0, err
		}
		var size int64
		var secs float64
		if _, err := fmt.Sscanf(out, "%d %g", &size, &secs); err != nil || size != bigSize {
			return 0, fmt.Errorf("download: %q", out)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	firstByte := func(sb *docker.Sandbox) ([]time.Duration, error) {
		out, err := runOut(ctx, sb, "for i in $(seq 60); do curl -sS -o /dev/null -w '%{time_starttransfer}\\n' http://"+hp+"/small || exit 1; done")
		if err != nil {
			return nil, err
		}
		var ds []time.Duration
		for _, f := range strings.Fields(out)[10:] { // the first ten warm up
			s, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("first byte: %q", out)
			}
			ds = append(ds, time.Duration(s*float64(time.Second)))
		}
		return ds, nil
	}
	var askDL, openDL []time.Duration
	for range 3 {
		a, err := download(askSB)
		if err != nil {
			return fmt.Errorf("ask mode: %w", err)
		}
		o, err := download(openSB)
		if err != nil {
			return fmt.Errorf("open mode: %w", err)
		}
		askDL, openDL = append(askDL, a), append(openDL, o)
	}
	askFB, err := firstByte(askSB)
	if err != nil {
		return fmt.Errorf("ask mode: %w", err)
	}
	openFB, err := firstByte(openSB)
	if err != nil {
		return fmt.Errorf("open mode: %w", err)
	}
	r.section("network (issue 13)")
	mbps := func(d time.Duration) string { return fmt.Sprintf("%.0f MB/s", float64(bigSize)/(1<<20)/d.Seconds()) }
	am, om := median(askDL), median(openDL)
	r.add("200 MB download, open mode (bridge), median of 3", mbps(om), "", true)
	r.add("200 MB download, ask mode (through the proxy), median of 3", mbps(am), "", true)
	ratio := om.Seconds() / am.Seconds()
	r.add("throughput ask / open", fmt.Sprintf("%.2fx", ratio), ">= 0.5x", ratio >= 0.5)
	afb, ofb := median(askFB), median(openFB)
	r.add("time to first byte, open mode, median of 50", ms(ofb), "", true)
	r.add("time to first byte, ask mode, median of 50", ms(afb), "", true)
	over := afb - ofb
	r.add("connection set-up overhead of the proxy (allowed host)", ms(over), "<= 5 ms", over <= 5*time.Millisecond)
	return nil
}

// runOut runs a shell command in sb and returns its stdout.
func runOut(ctx context.Context, sb sandbox.Sandbox, shell string) (string, error) {
	var out, errb strings.Builder
	res, err := sb.Run(ctx, sandbox.Command{Shell: shell, Stdout: &out, Stderr: &errb})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%s: exit %d: %s", shell, res.ExitCode, errb.String())
	}
	return out.String(), nil
}

// gateway is the host's address on the engine's default bridge network.
func gateway(ctx context.Context, api *client.Client) (netip.Addr, error) {
	res, err := api.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	var subnets []netip.Prefix
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.IsValid() {
			return c.Gateway, nil
		}
		subnets = append(subnets, c.Subnet)
	}
	// No gateway recorded: the host's interface inside the subnet.
	for _, a := range egress.LocalAddrs() {
		for _, s := range subnets {
			if s.Contains(a) {
				return a, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("no host address on the bridge network (subnets %v)", subnets)
}
