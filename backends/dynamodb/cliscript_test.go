package dynamodb_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// TestCLIScriptMakesTheTable: the create-table input CLIScript's script
// sends, sent to the server as the AWS CLI would, makes a table Prepare
// then finds ready; every command names the endpoint without its user
// information; a bad table name or endpoint is an error, not a script.
func TestCLIScriptMakesTheTable(t *testing.T) {
	name := fmt.Sprintf("cli-%d", prefixes.Add(1))
	script, err := dynamodb.CLIScript(name, "http://user:secret@localhost:8000/?token=t")
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]string{}
	commands := 0
	for line := range strings.SplitSeq(script, "\n") {
		if !strings.HasPrefix(line, "aws dynamodb ") {
			continue
		}
		commands++
		if !strings.Contains(line, " --endpoint-url http://localhost:8000/ ") {
			t.Errorf("command without the endpoint: %s", line)
		}
		if op, js, ok := strings.Cut(line, " --cli-input-json '"); ok {
			inputs[strings.Fields(op)[2]] = strings.TrimSuffix(js, "'")
		}
	}
	if commands != 3 || strings.Contains(script, "secret") || strings.Contains(script, "token") {
		t.Fatalf("script of %d commands, want 3, and no credential:\n%s", commands, script)
	}
	var create dyn.CreateTableInput
	if err := json.Unmarshal([]byte(inputs["create-table"]), &create); err != nil {
		t.Fatalf("create-table's input: %v\n%s", err, script)
	}
	var ttl dyn.UpdateTimeToLiveInput
	if err := json.Unmarshal([]byte(inputs["update-time-to-live"]), &ttl); err != nil || *ttl.TableName != name {
		t.Fatalf("update-time-to-live's input: %v\n%s", err, script)
	}
	if _, err := client.CreateTable(t.Context(), &create); err != nil {
		t.Fatal(err)
	}
	if p, err := dynamodb.Prepare(t.Context(), client, name); err != nil || !p.Existed {
		t.Fatalf("Prepare after the script's create-table = %+v, %v; want a table that existed", p, err)
	}

	for _, bad := range [][2]string{{"ab", ""}, {name, "localhost:8000"}, {name, "ftp://localhost/"}} {
		if s, err := dynamodb.CLIScript(bad[0], bad[1]); err == nil {
			t.Errorf("CLIScript(%q, %q) = a script, want an error:\n%s", bad[0], bad[1], s)
		}
	}
}
