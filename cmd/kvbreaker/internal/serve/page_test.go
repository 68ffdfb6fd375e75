package serve

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's headless browser.
const chromium = "/usr/bin/chromium"

// TestStatusPage: in headless Chromium, the status page shows a circuit
// the test opens within a second, a reset from the keyboard closes it,
// and the page logs no error to the console. Screenshots at two widths go
// to the test's artifact directory (go test -artifacts).
func TestStatusPage(t *testing.T) {
	if _, err := exec.LookPath(chromium); err != nil {
		t.Fatalf("Debian's chromium is needed at %s (apt-get install chromium): %v", chromium, err)
	}
	f := newFixture(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// Subscribed before the page loads, read until the end.
	console := chromedp.Console(ctx)
	var mu sync.Mutex
	var consoleErrors []string
	var wg sync.WaitGroup
	cctx, stopConsole := context.WithCancel(ctx)
	wg.Go(func() {
		for m, err := range console {
			if err != nil || cctx.Err() != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.Type == chromedp.ConsoleException {
				mu.Lock()
				consoleErrors = append(consoleErrors, string(m.Type)+": "+m.Text)
				mu.Unlock()
			}
		}
	})
	defer wg.Wait()
	defer stopConsole()
	defer cancel()
	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx,
		chromedp.Navigate(f.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tokOperator),
		chromedp.Click(chromedp.CSS(`#login button`)),
		chromedp.WaitVisible(chromedp.ID("none")),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}

	opened := time.Now()
	f.report(`{"outcomes":[{"host":"page.example","outcome":"failure"},{"host":"page.example","outcome":"failure"}]}`)
	row := chromedp.CSS(`tr[data-host="page.example"]`)
	if err := chromedp.Do(tctx, chromedp.WaitVisible(row)); err != nil {
		t.Fatalf("the opened circuit did not appear: %v", err)
	}
	// When the page drew the row, by its own clock (this machine's): the
	// devtools round trips of a loaded machine do not count.
	attrs, err := chromedp.Run(tctx, chromedp.Attributes(row))
	if err != nil {
		t.Fatal(err)
	}
	shown, err := strconv.ParseInt(attrs["data-shown-at"], 10, 64)
	if err != nil {
		t.Fatalf("data-shown-at %q: %v", attrs["data-shown-at"], err)
	}
	if d := time.UnixMilli(shown).Sub(opened); d > time.Second {
		t.Errorf("the opened circuit was drawn %v after it opened, want within a second", d)
	} else {
		t.Logf("the opened circuit was drawn %v after it opened", d)
	}
	state, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`tr[data-host="page.example"] td[data-label="State"]`)))
	if err != nil || state != "open" {
		t.Fatalf("state shown %q, %v", state, err)
	}

	dir := t.ArtifactDir()
	for _, w := range []int64{1280, 420} {
		if err := chromedp.Do(tctx, chromedp.EmulateViewport(w, 700)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, "status-page-"+map[int64]string{1280: "wide", 420: "narrow"}[w]+".png")
		if err := os.WriteFile(name, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Reset by keyboard: focus the row's button, press Enter.
	if err := chromedp.Do(tctx,
		chromedp.Focus(chromedp.CSS(`button[data-host="page.example"]`)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitNotPresent(row),
	); err != nil {
		t.Fatalf("reset from the page: %v", err)
	}
	st, err := f.b.Inspect(t.Context(), "page.example")
	if err != nil || st.Found {
		t.Fatalf("after the page's reset the store holds %+v, %v", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the console shows errors: %q", consoleErrors)
	}
}
