package dynamodb_test

import (
	"net/http"
	"testing"

	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// endpointStore is a store over the DynamoDB API at url, through a client
// whose connections are counted.
func endpointStore(url string) backendtest.Endpoint {
	return backendtest.Endpoint{
		Backend: "dynamodb", Name: "dynamodb", URL: url,
		New: func(t *testing.T) (driver.Store, func() int) {
			tr, dials := backendtest.CountingTransport(t)
			s, err := dynamodb.New(newClient(url, func(o *dyn.Options) { o.HTTPClient = &http.Client{Transport: tr} }), table)
			if err != nil {
				t.Fatal(err)
			}
			return s, func() int { return int(dials.Load()) }
		},
	}
}

// TestUnreachableFailsFast: against a closed port every call returns at
// once, after one connection attempt, typed: the SDK's retryer, which
// would try 4 times and report "exceeded maximum number of attempts …
// connection refused", is told not to retry a dial error.
func TestUnreachableFailsFast(t *testing.T) {
	backendtest.Unreachable(t, endpointStore("http://"+backendtest.ClosedPort(t)))
}

// TestSilentEndpointBoundedByContext: an endpoint that accepts connections
// and never answers costs the caller its context's deadline, not more, and
// the error says that nobody answered, where the SDK's reads only
// "https response error StatusCode: 0, RequestID: , canceled, context
// deadline exceeded".
func TestSilentEndpointBoundedByContext(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	backendtest.Silent(t, endpointStore("http://"+addr))
}
