package serve

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// TestDecideRouteAsMux: the server's handler, which sends the decision
// route's requests past the mux, answers every request as the mux does,
// and as the handler before the shortcut (beforeHandler) did: status,
// headers and body alike, over methods, spellings of the path,
// credentials (none, unknown, lacking the permission, by token and by
// client certificate) and bodies. The cases' answers differ among
// themselves (the negative control: a comparison that could not tell
// answers apart would see one status).
func TestDecideRouteAsMux(t *testing.T) {
	f := newFixture(t)
	handlers := map[string]http.Handler{"mux": f.srv.mux, "before": beforeHandler(f.srv)}
	cert := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "worker-7"}}}}}
	statuses := map[int]bool{}
	cases := 0
	for _, method := range []string{"POST", "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "CONNECT"} {
		for _, target := range []string{"/v1/decide", "/v1/decide?x=1", "/v1/decide/", "/v1//decide", "/v1/%64ecide", "/V1/decide", "/v1/./decide", "/v1/outcomes"} {
			for _, auth := range []string{"", "Bearer " + tokWorker, "Bearer " + tokReader, "Bearer nope", "Basic x", "cert"} {
				for _, body := range []string{`{"deliveries":[{"host":"route.example"}]}`, `{"deliveries":[{"host":"route.example","held_since":"2026-01-02T03:04:05Z"}]}`, `{"Deliveries":[{"host":"https://Route.example:443/x"}]}`, `{"deliveries":[{"host":""}]}`, `{`} {
					answer := func(h http.Handler) *httptest.ResponseRecorder {
						req := httptest.NewRequest(method, target, strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						switch auth {
						case "":
						case "cert":
							req.TLS = cert
						default:
							req.Header.Set("Authorization", auth)
						}
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						return w
					}
					got := answer(f.srv.Handler())
					statuses[got.Code] = true
					cases++
					for name, h := range handlers {
						want := answer(h)
						if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
							t.Errorf("%s %s, credentials %q, body %s: the handler answers\n%d %v %s\nthe %s\n%d %v %s",
								method, target, auth, body, got.Code, got.Header(), got.Body, name, want.Code, want.Header(), want.Body)
						}
					}
				}
			}
		}
	}
	if len(statuses) < 5 {
		t.Errorf("%d cases gave the statuses %v: want at least 5 different ones", cases, statuses)
	}
}
