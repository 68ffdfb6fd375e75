package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The linearizability case's operations on one key, as porcupine sees them.
type (
	opGet struct{}
	opCAS struct {
		old   driver.Version
		value string
	}
	opDel struct{ old driver.Version }

	getOut struct {
		found bool
		value string
		ver   driver.Version
	}
	// writeOut is a CompareAndSwap's or CompareAndDelete's answer.
	writeOut struct {
		ok, notFound, conflict bool
		ver                    driver.Version // new version (CAS ok)
		// cur is what a *driver.ConflictError said the key holds.
		hasCur   bool
		curVer   driver.Version
		curValue string
	}
	regState struct {
		value string
		ver   driver.Version // NoVersion: absent
	}
)

// registerModel is the sequential specification of one key: a value and its
// version, or absent.
var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(st, in, out any) (bool, any) {
		s := st.(regState)
		switch in := in.(type) {
		case opGet:
			o := out.(getOut)
			if !o.found {
				return s.ver == driver.NoVersion, s
			}
			return s.ver == o.ver && s.value == o.value, s
		case opCAS:
			o := out.(writeOut)
			if o.ok {
				return in.old == s.ver && o.ver != driver.NoVersion, regState{value: in.value, ver: o.ver}
			}
			return o.conflict && in.old != s.ver && o.curMatches(s), s
		case opDel:
			o := out.(writeOut)
			switch {
			case o.ok:
				return s.ver != driver.NoVersion && in.old == s.ver, regState{}
			case o.notFound:
				return s.ver == driver.NoVersion, s
			}
			return o.conflict && s.ver != driver.NoVersion && in.old != s.ver && o.curMatches(s), s
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		switch in := in.(type) {
		case opGet:
			o := out.(getOut)
			if !o.found {
				return "get() → absent"
			}
			return fmt.Sprintf("get() → %q@%d", o.value, o.ver)
		case opCAS:
			return fmt.Sprintf("cas(%d, %q) → %s", in.old, in.value, out.(writeOut))
		case opDel:
			return fmt.Sprintf("delete(%d) → %s", in.old, out.(writeOut))
		}
		return "?"
	},
}

func (o writeOut) curMatches(s regState) bool {
	return !o.hasCur || (o.curVer == s.ver && (s.ver == driver.NoVersion || o.curValue == s.value))
}

func (o writeOut) String() string {
	switch {
	case o.ok:
		return fmt.Sprintf("ok@%d", o.ver)
	case o.notFound:
		return "not found"
	case o.hasCur:
		return fmt.Sprintf("conflict (holds %q@%d)", o.curValue, o.curVer)
	}
	return "conflict"
}

// checkHistory is porcupine's search (a variable so the suite's own tests
// can make it time out).
var checkHistory = porcupine.CheckOperationsTimeout

// linearizableAttempts is how many fresh histories the case checks before
// calling a search that keeps timing out, or a race whose calls keep
// going unanswered, inconclusive.
const linearizableAttempts = 3

// checkLinearizable races Goroutines workers through read-then-swap rounds
// on one key (with an occasional compare-and-delete) and checks the history
// with porcupine. It has no false positives; a race that did not happen is
// not found, so raise WithIterations and run under -race for more. A
// search that times out proves nothing, nor does a race in which a call
// had no answer within its deadline (a loaded machine: its outcome is
// unknown, and the history cannot be checked): the case retries on a
// fresh history and, if every attempt ends so, reports itself
// inconclusive, not passed. A call that failed otherwise fails the case.
func checkLinearizable(ctx context.Context, e *env) {
	var why []string
	for attempt := 1; attempt <= linearizableAttempts; attempt++ {
		res, unanswered := e.raceOnce(ctx, fmt.Sprintf("linearizable-%d.example", attempt))
		switch {
		case unanswered != nil:
			e.logf("attempt %d: a call had no answer under concurrency, so the history cannot be checked: %v", attempt, unanswered)
			why = append(why, fmt.Sprintf("attempt %d: a call had no answer: %v", attempt, unanswered))
		case res == porcupine.Unknown:
			e.logf("attempt %d: porcupine's search timed out after %v: no verdict", attempt, e.opts.CheckTimeout)
			why = append(why, fmt.Sprintf("attempt %d: porcupine's search timed out after %v", attempt, e.opts.CheckTimeout))
		default:
			return
		}
	}
	e.mu.Lock()
	e.inconclusive = fmt.Sprintf("no verdict on %d fresh histories (%s); lower WithIterations, or run on a less loaded machine", linearizableAttempts, strings.Join(why, "; "))
	e.mu.Unlock()
}

// unanswered reports whether err is a call's that had no answer within its
// own deadline, or reached no server, while the case's context was still
// alive: the machine's or the network's load, which says nothing of the
// order the store gives writes.
func unanswered(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrUnreachable))
}

// raceOnce runs one race on key and checks its history; it returns
// porcupine's verdict (Illegal and a failed race are reported; Ok for a
// race that could not be checked, as there is nothing to retry), or the
// error of a call that had no answer (unanswered), for a retry.
func (e *env) raceOnce(ctx context.Context, key string) (porcupine.CheckResult, error) {
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		failed  error
	)
	base := time.Now()
	stamp := func() int64 { return int64(time.Since(base)) }
	record := func(client int, in, out any, call int64) {
		ret := stamp()
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
		mu.Unlock()
	}
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		mu.Unlock()
	}
	writeResult := func(err error) (writeOut, error) {
		var o writeOut
		switch {
		case err == nil:
			o.ok = true
		case errors.Is(err, driver.ErrNotFound):
			o.notFound = true
		case errors.Is(err, driver.ErrConflict):
			o.conflict = true
			if ce, ok := errors.AsType[*driver.ConflictError](err); ok {
				o.hasCur, o.curVer, o.curValue = true, ce.Version, string(ce.Value)
			}
		default:
			return o, err
		}
		return o, nil
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range e.opts.Goroutines {
		wg.Go(func() {
			<-start
			for i := range e.opts.Iterations {
				if ctx.Err() != nil {
					fail(ctx.Err())
					return
				}
				call := stamp()
				v, ver, err := e.store.Get(ctx, key)
				found := err == nil
				if err != nil && !errors.Is(err, driver.ErrNotFound) {
					fail(fmt.Errorf("Get(%q) = %w", key, err))
					return
				}
				record(w, opGet{}, getOut{found: found, value: string(v), ver: ver}, call)
				if !found {
					ver = driver.NoVersion
				}
				yield()
				call = stamp()
				if found && i%8 == 7 {
					err := e.store.CompareAndDelete(ctx, key, ver)
					o, err := writeResult(err)
					if err != nil {
						fail(fmt.Errorf("CompareAndDelete(%q, %d) = %w", key, ver, err))
						return
					}
					record(w, opDel{old: ver}, o, call)
					continue
				}
				value := fmt.Sprintf("w%d-%d", w, i)
				nv, err := e.store.CompareAndSwap(ctx, key, ver, []byte(value), ttl)
				o, err := writeResult(err)
				if err != nil {
					fail(fmt.Errorf("CompareAndSwap(%q, %d) = %w", key, ver, err))
					return
				}
				o.ver = nv
				record(w, opCAS{old: ver, value: value}, o, call)
			}
		})
	}
	close(start)
	wg.Wait()
	if failed != nil {
		if unanswered(ctx, failed) {
			return porcupine.Unknown, failed
		}
		e.errorf(promiseLinearizable, "a call failed under concurrency, so the history cannot be checked: %v", failed)
		return porcupine.Ok, nil
	}
	// Direct evidence first: versions are never reused ("no-version-reuse"),
	// so two writes that both succeeded from one version lost an update.
	wins := map[driver.Version][]string{}
	oks := 0
	for _, op := range history {
		var old driver.Version
		var ok bool
		switch in := op.Input.(type) {
		case opCAS:
			old, ok = in.old, op.Output.(writeOut).ok
		case opDel:
			old, ok = in.old, op.Output.(writeOut).ok
		}
		if ok {
			oks++
			if old != driver.NoVersion {
				wins[old] = append(wins[old], registerModel.DescribeOperation(op.Input, op.Output))
			}
		}
	}
	for old, ws := range wins {
		if len(ws) > 1 {
			e.errorf(promiseNoLostUpdate, "%d writes expecting version %d all succeeded: %v", len(ws), old, ws)
		}
	}
	if oks == 0 {
		e.errorf(promiseLinearizable, "no write succeeded in %d operations", len(history))
	}
	res := checkHistory(registerModel, history, e.opts.CheckTimeout)
	switch res {
	case porcupine.Illegal:
		e.errorf(promiseLinearizable, "the history of %d operations (%d successful writes) by %d goroutines has no linearization", len(history), oks, e.opts.Goroutines)
	case porcupine.Ok:
		e.logf("%d operations (%d successful writes) by %d goroutines: linearizable", len(history), oks, e.opts.Goroutines)
	}
	return res, nil
}
