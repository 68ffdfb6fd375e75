package dynamodb_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// awsEnv points the AWS SDK's default configuration at fake credentials
// and region, and at no shared files, so that Dial reads only what the
// test sets.
func awsEnv(t *testing.T, region string) {
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", region)
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFORTESTS")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-for-tests")
}

// TestDialChecksWhatItOpens: Dial opens a table that exists and works
// through it; a missing table, a closed port and a missing region each
// fail at Dial, in words that name what to fix and show no credential.
func TestDialChecksWhatItOpens(t *testing.T) {
	awsEnv(t, "us-east-1")
	s, err := dynamodb.Dial(t.Context(), table, localEndpoint())
	if err != nil {
		t.Fatalf("Dial(existing table) = %v", err)
	}
	if _, _, err := s.Get(t.Context(), "dial-test-absent"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get through the dialled store = %v, want ErrNotFound", err)
	}
	_ = s.Close()

	_, err = dynamodb.Dial(t.Context(), "no-such-table", localEndpoint())
	if !errors.Is(err, dynamodb.ErrNoTable) || !strings.Contains(err.Error(), "no-such-table does not exist in us-east-1 at "+localEndpoint()) {
		t.Errorf("Dial(missing table) = %v, want ErrNoTable naming the table, region and endpoint", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://user:SECRET@" + l.Addr().String()
	_ = l.Close()
	_, err = dynamodb.Dial(t.Context(), table, closed)
	if ue, ok := errors.AsType[*driver.UnreachableError](err); !ok || ue.Endpoints[0] != "http://"+l.Addr().String() || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Dial(closed port) = %v, want an *UnreachableError at http://%s without the credential", err, l.Addr())
	}

	awsEnv(t, "")
	if _, err := dynamodb.Dial(t.Context(), table, localEndpoint()); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("Dial without a region = %v, want the missing region named", err)
	}
}

// TestStoreString: a Store names its table, region and endpoint, Dial's
// and New's alike, without the endpoint's user information; a client
// without an endpoint of its own names AWS's for its region.
func TestStoreString(t *testing.T) {
	awsEnv(t, "us-east-1")
	s, err := dynamodb.Dial(t.Context(), table, localEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "dynamodb table "+table+" in us-east-1 at "+localEndpoint(); got != want {
		t.Errorf("Dial's Store.String() = %q, want %q", got, want)
	}
	withUser := strings.Replace(localEndpoint(), "http://", "http://user:SECRET@", 1)
	n, err := dynamodb.New(newClient(withUser), "other.table")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.String(), "dynamodb table other.table in us-east-1 at "+localEndpoint(); got != want {
		t.Errorf("New's Store.String() = %q, want %q", got, want)
	}
	awsClient := dyn.New(dyn.Options{Region: "eu-west-1"})
	if n, err = dynamodb.New(awsClient, table); err != nil {
		t.Fatal(err)
	}
	if got, want := n.String(), "dynamodb table "+table+" in eu-west-1 at https://dynamodb.eu-west-1.amazonaws.com"; got != want {
		t.Errorf("String() without an endpoint = %q, want %q", got, want)
	}
}
