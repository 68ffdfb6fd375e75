package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
)

func createTable(ctx context.Context, t *testing.T, c *dyn.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(ctx, &dyn.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func tables(ctx context.Context, c *dyn.Client) ([]string, error) {
	out, err := c.ListTables(ctx, &dyn.ListTablesInput{})
	if err != nil {
		return nil, err
	}
	return out.TableNames, nil
}

func TestKillRestartInMemory(t *testing.T) {
	ctx := t.Context()
	s := dynalite.MustStart(t)
	c := newClient(s.Endpoint)
	createTable(ctx, t, c, "t01")
	if got, err := tables(ctx, c); err != nil || len(got) != 1 {
		t.Fatalf("ListTables = %v, %v; want [t01]", got, err)
	}
	pid := s.PID()
	s.Kill()
	if s.PID() != 0 {
		t.Fatal("PID still set after Kill")
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := tables(cctx, c)
	cancel()
	if err == nil {
		t.Fatal("ListTables succeeded against a killed server")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("PID after restart = %d (was %d)", s.PID(), pid)
	}
	got, err := tables(ctx, c)
	if err != nil {
		t.Fatalf("ListTables after restart on the same endpoint: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("in-memory server kept tables across a kill: %v", got)
	}
}

func TestPersistentSurvivesKill(t *testing.T) {
	ctx := t.Context()
	s := dynalite.MustStart(t, dynalite.Persistent(t.TempDir()))
	c := newClient(s.Endpoint)
	createTable(ctx, t, c, "kept")
	s.Kill()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := tables(ctx, c)
	if err != nil || len(got) != 1 || got[0] != "kept" {
		t.Fatalf("ListTables after restart = %v, %v; want [kept]", got, err)
	}
}

func TestNoTTLAPI(t *testing.T) {
	// Documents the gap adapters must tolerate.
	s := dynalite.MustStart(t)
	c := newClient(s.Endpoint)
	createTable(t.Context(), t, c, "ttl")
	_, err := c.UpdateTimeToLive(t.Context(), &dyn.UpdateTimeToLiveInput{
		TableName:               aws.String("ttl"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)},
	})
	if err == nil {
		t.Fatal("dynalite accepted UpdateTimeToLive: the package doc's list of gaps is out of date")
	}
	t.Logf("UpdateTimeToLive on dynalite: %v", errors.Unwrap(err))
}

// TestSurvivesAbortedRequest: a client that resets its connection in the
// middle of a request body (as the fault proxy does) costs that request
// only. The launcher installs a handler for it: without one, dynalite
// throws "aborted" (ECONNRESET) from the request's error handler and the
// whole server exits, failing every later test that shares it.
func TestSurvivesAbortedRequest(t *testing.T) {
	ctx := t.Context()
	s, err := dynalite.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for range 3 {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// Headers promise 1,000 bytes; send 10, then reset.
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Limit\":", s.Addr())
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
	// The server answers a real request afterwards, still the same process.
	pid := s.PID()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := tables(ctx, newClient(s.Endpoint))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer after aborted requests: %v\nstderr: %s", err, s.Stderr())
		}
		select {
		case <-s.Done():
			t.Fatalf("dynalite exited after a client aborted a request; stderr:\n%s", s.Stderr())
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-s.Done():
		t.Fatalf("dynalite exited; stderr:\n%s", s.Stderr())
	default:
	}
	if s.PID() != pid {
		t.Fatal("the server was restarted")
	}
}
