package serve

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// TestFastMatchesEncodingJSON: the decision route's reader, writer and
// host-key shortcut answer what encoding/json and kvbreaker.HostKey
// answer, on every input they accept; and they decline inputs of other
// shapes, so that those reach encoding/json.
func TestFastMatchesEncodingJSON(t *testing.T) {
	t.Run("parse", func(t *testing.T) {
		accepted := 0
		for _, body := range []string{
			`{"deliveries":[{"host":"a.example"}]}`,
			` { "deliveries" : [ { "host" : "a.example" , "held_since" : "2026-01-02T03:04:05.123456789Z" } ] } ` + "\n",
			`{"deliveries":[{"host":"a.example","held_since":null}]}`,
			`{"deliveries":[{"held_since":"2026-01-02T03:04:05+02:00","host":"https://B.example:443/x"},{"host":"b.example"},{}]}`,
			`{"deliveries":[]}`,
			`{"deliveries":[{"host":"a.example","host":"b.example"}]}`,
			`{"deliveries":[{"host":"a.example","held_since":"2026-01-02T03:04:05Z","held_since":null}]}`,
			`{"deliveries":[{"host":"a.example"}]}` + "\t\r\n ",
			// Declined: encoding/json decides these.
			`{"deliveries":[{"Host":"a.example"}]}`,
			`{"deliveries":[{"host":"a\u002eexample"}]}`,
			`{"deliveries":null}`,
			`{"deliveries":[{"host":"a.example","extra":1}]}`,
			`{"deliveries":[{"host":"a.example"}]} {}`,
			`{"deliveries":[{"host":"a.example","held_since":"yesterday"}]}`,
			`{"deliveries":[{"host":"a.example"},]}`,
			`{"deliveries":[{"host":"é.example"}]}`,
			`{"deliveries":[{"host":"a.example"}]`,
			`[]`,
		} {
			ds, ok := parseDecide([]byte(body), nil)
			var req DecideRequest
			dec := json.NewDecoder(strings.NewReader(body))
			dec.DisallowUnknownFields()
			jerr := dec.Decode(&req)
			if !ok {
				continue
			}
			accepted++
			if jerr != nil {
				t.Errorf("%s: the fast reader accepts what encoding/json refuses (%v)", body, jerr)
				continue
			}
			var want []delivery
			for _, d := range req.Deliveries {
				e := delivery{host: d.Host}
				if d.HeldSince != nil {
					e.held, e.hasHeld = *d.HeldSince, true
				}
				want = append(want, e)
			}
			if len(ds) != len(want) {
				t.Errorf("%s: %d deliveries, encoding/json %d", body, len(ds), len(want))
				continue
			}
			for i := range ds {
				if ds[i].host != want[i].host || ds[i].hasHeld != want[i].hasHeld || !ds[i].held.Equal(want[i].held) {
					t.Errorf("%s: delivery %d is %+v, encoding/json %+v", body, i, ds[i], want[i])
				}
			}
		}
		if accepted < 8 {
			t.Errorf("the fast reader took %d of the 8 bodies of its shape", accepted)
		}
		for _, body := range []string{`{"deliveries":[{"Host":"a.example"}]}`, `{"deliveries":null}`, `{"deliveries":[{"host":"a.example"}]} {}`} {
			if _, ok := parseDecide([]byte(body), nil); ok {
				t.Errorf("%s: the fast reader took it", body)
			}
		}
	})

	t.Run("write", func(t *testing.T) {
		at := time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC)
		zero := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		vs := []Verdict{
			{Host: "a.example", Decision: "send"},
			{Host: "b.example:8080", Decision: "hold", RetryAt: &at, RetryInMS: ptr(int64(1500)), HeldSince: &zero},
			{Host: "c.example", Decision: "probe", ProbeID: ptr("ABCDEFGHIJKLMNOPQRSTUVWXYZ")},
			{Host: "[::1]:8443", Decision: "send", Error: ptr(`dial tcp: "quoted" <html> & é ` + "\x01\u2028")},
			{Host: "a.example", Decision: "hold", RetryAt: ptr(time.Date(2026, 1, 2, 3, 4, 5, 1, time.FixedZone("x", 3600))), RetryInMS: ptr(int64(0)), HeldSince: &at},
		}
		for n := 1; n <= len(vs); n++ {
			want, err := json.Marshal(DecideResponse{Verdicts: vs[:n]})
			if err != nil {
				t.Fatal(err)
			}
			if got := appendVerdicts(nil, vs[:n]); string(got) != string(want)+"\n" {
				t.Errorf("%d verdicts:\n got %s\nwant %s", n, got, want)
			}
		}
	})

	t.Run("host-key", func(t *testing.T) {
		cases := []string{
			"a.example", "_dmarc.example.com", "my_site.example", "a-b.example", "ab--cd.example", "xn--bcher-kva.example",
			"xn--zz.example", "1.2.3.4", "01.2.3.4", "1.2.3", "a.example.", "-a.example", "a-.example", "a..example",
			"A.example", "a.example:443", "a", "9", "ÿ.example", strings.Repeat("a", 63) + ".example", strings.Repeat("a", 64) + ".example",
			strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 127) + "a",
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const alphabet = "ab9-_.x"
		for range 5000 {
			b := make([]byte, 1+rng.IntN(12))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			cases = append(cases, string(b))
		}
		fast := 0
		for _, h := range cases {
			k, ok := hostKeyFast(h)
			if !ok {
				continue
			}
			fast++
			want, err := kvbreaker.HostKey(h)
			if err != nil || k != want {
				t.Errorf("%q: the shortcut gives %q, HostKey %q, %v", h, k, want, err)
			}
		}
		if fast < 100 {
			t.Errorf("the shortcut took only %d names", fast)
		}
	})
}

// TestDecideFastAndSlowAgree: a decision asked in a body of the fast
// shape and in one encoding/json reads answer alike.
func TestDecideFastAndSlowAgree(t *testing.T) {
	f := newFixture(t)
	a := f.decide(`{"deliveries":[{"host":"agree.example"},{"host":"https://Agree.example:443/x"}]}`)
	b := f.decide(`{"Deliveries":[{"Host":"agree.example"},{"host":"https://Agree.example:443/x"}]}`)
	if !reflect.DeepEqual(a, b) || len(a.Verdicts) != 2 || a.Verdicts[1].Host != "agree.example" {
		t.Errorf("fast %+v, encoding/json %+v", a, b)
	}
}
