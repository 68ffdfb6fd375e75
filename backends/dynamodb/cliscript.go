package dynamodb

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// CLIScript is the AWS CLI v2 commands that make table as CreateTable
// does, for an operator or a migration tool that creates it by hand: a
// shell script of create-table and update-time-to-live with TableJSON's
// inputs, and the wait for the table between them. A non-empty endpoint
// (DynamoDB Local, dynalite) must be an http:// or https:// URL; each
// command then sends to it (--endpoint-url), shown without user
// information, query or fragment (adapter.ShownURL). Errors are
// TableJSON's, or the endpoint's.
func CLIScript(table, endpoint string) (string, error) {
	create, ttl, err := TableJSON(table)
	if err != nil {
		return "", err
	}
	flag := ""
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("dynamodb: endpoint %s: want an http:// or https:// URL", adapter.ShownURL(endpoint))
		}
		flag = " --endpoint-url " + shellWord(adapter.ShownURL(endpoint))
	}
	return fmt.Sprintf(`# The DynamoDB table kvbreaker's store uses, as "kvbreaker init" creates it (dynamodb.CreateTable),
# with the AWS CLI v2 (region and credentials from AWS_REGION, AWS_PROFILE, ...).
aws dynamodb create-table%[1]s --cli-input-json %[2]s
aws dynamodb wait table-exists%[1]s --table-name %[3]s
# TTL lets DynamoDB delete expired items (within days); the store reads them as absent either way.
aws dynamodb update-time-to-live%[1]s --cli-input-json %[4]s
`, flag, shellWord(create), shellWord(table), shellWord(ttl)), nil
}

// plainWord matches a word a POSIX shell reads as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9._:/@%+=,-]+$`)

// shellWord is s as one word of a POSIX shell: as it is when it can be,
// else in single quotes.
func shellWord(s string) string {
	if plainWord.MatchString(s) && s[0] != '-' {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
