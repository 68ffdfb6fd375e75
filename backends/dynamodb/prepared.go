package dynamodb

// String says what Prepare found and did, for a tool's output: "created
// (partition key "pk", on-demand billing, TTL on "purgeAt" where the
// server has the TTL API)" or "exists already, with the key schema the
// store needs; TTL on "purgeAt" checked".
func (p Prepared) String() string {
	if p.Existed {
		return `exists already, with the key schema the store needs; TTL on "` + AttrPurgeAt + `" checked`
	}
	return `created (partition key "` + AttrKey + `", on-demand billing, TTL on "` + AttrPurgeAt + `" where the server has the TTL API)`
}
