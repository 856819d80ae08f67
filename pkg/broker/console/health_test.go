//go:build linux

package console_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/broker/supervise"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// buildStreamcast builds the streamcast command for the maintenance
// children serve starts.
func buildStreamcast(t *testing.T) string {
	t.Helper()
	path, err := testkit.BuildStreamcast(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// childOf is the role's child in the server's stats.
func childOf(srv *broker.Server, role string) supervise.ChildStats {
	for _, c := range srv.Stats().Children {
		if c.Role == role {
			return c
		}
	}
	return supervise.ChildStats{}
}

// TestConsoleFlagsAMaintainChildThatRestarted serves a durable stream
// with its seal, publish and clean children, SIGKILLs the seal child, and
// checks the streams view makes it stand out: once the child is back and
// ready, its badge and the stream's row are still marked bad and say it
// restarted.
func TestConsoleFlagsAMaintainChildThatRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds streamcast and starts child processes")
	}
	if !testkit.SoakFull() {
		// About 17 s, most of it building and restarting the children, to
		// keep the README's test run within its budget; CI runs it every
		// time.
		t.Skip("the restarted-child badge runs under " + testkit.SoakEnv + "=full")
	}
	ctx, errs := startBrowser(t)
	cfg := tradesConfig("127.0.0.1:0", t.TempDir())
	cfg.Maintain = config.Maintain{Enabled: true, FlushEvery: time.Second, SealEvery: 100 * time.Millisecond, PublishEvery: 500 * time.Millisecond, CleanEvery: 500 * time.Millisecond}
	srv, err := broker.New(cfg, broker.Options{Executable: buildStreamcast(t)})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready after 30 s")
	}
	base := "ws://" + srv.Addr().String()
	load(t, base, "trades", 1000, 0)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+srv.Addr().String()+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 10*time.Second, "every child ready and rows published", `document.querySelectorAll(".child").length === 3 && !document.querySelector(".child.bad") &&
		Number(document.querySelector('tr[data-stream="trades"] td:nth-child(9)').textContent.replace(/,/g, "")) > 0`, `document.querySelector("#streams-view").innerText`)
	if cls, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-stream="trades"]').className`)); cls != "" {
		t.Fatalf("the healthy stream's row is marked %q", cls)
	}
	screenshot(t, ctx, "console-streams-maintained.png")

	seal := childOf(srv, "seal").PID
	if seal == nil {
		t.Fatalf("no running seal child in %+v", srv.Stats().Children)
	}
	if err := syscall.Kill(*seal, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once the child is back and ready, the restart still stands out for
	// the sparkline's window: a glance a minute later must not miss it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		c := childOf(srv, "seal")
		if c.PID != nil && *c.PID != *seal && c.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the seal child was not restarted and ready after 15 s: %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	back := float64(time.Now().UnixMicro()) / 1e6
	waitJS(t, ctx, 5*time.Second, "stats from after the restart", fmt.Sprintf(`Number(document.querySelector("#streams").dataset.servedAt) > %f`, back), `document.querySelector("#streams").dataset.servedAt`)
	waitJS(t, ctx, time.Second, "the restarted seal child standing out", `[...document.querySelectorAll(".child.bad")].some((c) => c.textContent.includes("maintain seal: restarted 1×")) &&
		document.querySelector('tr[data-stream="trades"]').className === "bad"`, `document.querySelector("#streams-view").innerText`)
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-stream="trades"] td:last-child').textContent`))
	if !strings.Contains(text, "seal") {
		t.Fatalf("the maintain column says %q", text)
	}
	t.Logf("maintain column: %s", text)
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
