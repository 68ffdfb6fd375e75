package serve

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's headless browser.
const chromium = "/usr/bin/chromium"

// browser starts headless Chromium for the test and returns its context
// and what its console logged as an error or warning so far.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	if _, err := exec.LookPath(chromium); err != nil {
		t.Fatalf("Debian's chromium is needed at %s (apt-get install chromium): %v", chromium, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
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
	t.Cleanup(func() {
		stopConsole()
		cancel()
		wg.Wait()
		cancelAlloc()
	})
	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(tcancel)
	return tctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(consoleErrors)
	}
}

// login opens the page at url and gives it token.
func login(t *testing.T, ctx context.Context, url, token string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#login button`)),
		chromedp.WaitVisible(chromedp.ID("none")),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
}

// shownWithin checks that the page drew row within a second of opened,
// by the page's own clock (this machine's): the devtools round trips of a
// loaded machine do not count.
func shownWithin(t *testing.T, ctx context.Context, row chromedp.CSS, opened time.Time) {
	t.Helper()
	attrs, err := chromedp.Run(ctx, chromedp.Attributes(row))
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
}

// stateShown reads the State cell of host's row in one evaluation: the
// page redraws its table on every poll, so a node found by one devtools
// call may be gone by the next.
func stateShown(ctx context.Context, host string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('tr[data-host="`+host+`"] td[data-label="State"]') || {textContent: "no row"}).textContent`))
}

// screenshots saves the page at a wide and a narrow width to the test's
// artifact directory (go test -artifacts), as NAME-wide.png and
// NAME-narrow.png.
func screenshots(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := t.ArtifactDir()
	for _, w := range []int64{1280, 420} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 700)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name+"-"+map[int64]string{1280: "wide", 420: "narrow"}[w]+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusPage: in headless Chromium, the status page shows a circuit
// the test opens within a second, a reset from the keyboard closes it,
// and the page logs no error to the console. Screenshots at two widths go
// to the test's artifact directory.
func TestStatusPage(t *testing.T) {
	f := newFixture(t)
	ctx, consoleErrors := browser(t)
	login(t, ctx, f.url, tokOperator)

	opened := time.Now()
	f.report(`{"outcomes":[{"host":"page.example","outcome":"failure"},{"host":"page.example","outcome":"failure"}]}`)
	row := chromedp.CSS(`tr[data-host="page.example"]`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row)); err != nil {
		t.Fatalf("the opened circuit did not appear: %v", err)
	}
	shownWithin(t, ctx, row, opened)
	if state, err := stateShown(ctx, "page.example"); err != nil || state != "open" {
		t.Fatalf("state shown %q, %v", state, err)
	}
	screenshots(t, ctx, "status-page")

	// Reset by keyboard: focus the row's button, press Enter.
	if err := chromedp.Do(ctx,
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
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the console shows errors: %q", errs)
	}
}
