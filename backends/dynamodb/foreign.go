package dynamodb

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/kvbreaker/kvbreaker/driver"
)

// foreignAttrs are the attributes whose raw contents name a foreign item:
// everything Get, expiry and the write conditions look at. A write replaces
// all three (and the purge attribute), whatever their type.
var foreignAttrs = [...]string{AttrVersion, AttrExpiresAt, AttrRecord}

// foreign is what the adapter knows of an item it did not write in its own
// shape (see "Foreign items" in the package doc): the raw attributes that
// name it, and why it is not one of ours.
type foreign struct {
	raw    map[string]types.AttributeValue // foreignAttrs present in the item
	reason string
}

// foreignValueTag begins the value Get returns for a foreign item: format
// byte 0, which no record encoding uses, so a Breaker reads it as a corrupt
// record and replaces it on its next write.
const foreignValueTag = "\x00dynamodb: "

// foreignItem describes av, which decodeItem found malformed for reason, as
// an item with a version that names exactly its raw ver, expiresAt and rec
// attributes (a SHA-256 digest of them, never NoVersion) and an undecodable
// value. Its logical expiry is expiresAt when that is a number; otherwise
// it never expires logically (it lasts until a write replaces it, or
// DynamoDB's TTL deletes it by a numeric purgeAt).
func foreignItem(av map[string]types.AttributeValue, reason string) item {
	f := &foreign{raw: make(map[string]types.AttributeValue, len(foreignAttrs)), reason: reason}
	h := sha256.New()
	for _, name := range foreignAttrs {
		v, ok := av[name]
		if !ok {
			h.Write([]byte{0})
			continue
		}
		f.raw[name] = v
		h.Write([]byte{1})
		h.Write(appendAttr(nil, v))
	}
	sum := h.Sum(nil)
	ver := driver.Version(binary.BigEndian.Uint64(sum))
	if ver == driver.NoVersion {
		ver = 1
	}
	it := item{
		value:     []byte(foreignValueTag + reason),
		version:   ver,
		expiresAt: math.MaxInt64,
		foreign:   f,
	}
	if n, ok := av[AttrExpiresAt].(*types.AttributeValueMemberN); ok {
		it.expiresAt = ceilNumber(n.Value)
	}
	// The item's own version, if it has one, and its history are evidence
	// of this adapter's writes (a write of ours, then changed by someone
	// else), as for any item.
	if n, ok := av[AttrVersion].(*types.AttributeValueMemberN); ok {
		if v, err := strconv.ParseUint(n.Value, 10, 64); err == nil {
			it.own = driver.Version(v)
		}
	}
	it.history = decodeHistory(av)
	return it
}

// ceilNumber returns the DynamoDB number n rounded up to an integer (clamped
// to int64), so that "floor(now) >= ceil(n)" is "floor(now) >= n": the item
// is expired exactly when the condition #exp <= :now holds. An unparsable
// number (DynamoDB never returns one) never expires.
func ceilNumber(n string) int64 {
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(n, 64)
	switch {
	case err != nil && !strings.Contains(err.Error(), "range"):
		return math.MaxInt64
	case f >= math.MaxInt64 || math.IsInf(f, 1):
		return math.MaxInt64
	case f <= math.MinInt64 || math.IsInf(f, -1):
		return math.MinInt64
	}
	return int64(math.Ceil(f))
}

// appendAttr appends a canonical encoding of v: a type tag, then the value,
// length-prefixed; map entries sorted by name and set members sorted, as
// DynamoDB compares them.
func appendAttr(b []byte, v types.AttributeValue) []byte {
	str := func(b []byte, tag byte, s string) []byte {
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	set := func(b []byte, tag byte, ss []string) []byte {
		ss = slices.Sorted(slices.Values(ss))
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(len(ss)))
		for _, s := range ss {
			b = str(b, 0, s)
		}
		return b
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return str(b, 'S', v.Value)
	case *types.AttributeValueMemberN:
		return str(b, 'N', v.Value)
	case *types.AttributeValueMemberB:
		return str(b, 'B', string(v.Value))
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return append(b, 'T')
		}
		return append(b, 'F')
	case *types.AttributeValueMemberNULL:
		return append(b, '0')
	case *types.AttributeValueMemberSS:
		return set(b, 's', v.Value)
	case *types.AttributeValueMemberNS:
		return set(b, 'n', v.Value)
	case *types.AttributeValueMemberBS:
		ss := make([]string, len(v.Value))
		for i, x := range v.Value {
			ss[i] = string(x)
		}
		return set(b, 'b', ss)
	case *types.AttributeValueMemberL:
		b = append(b, 'L')
		b = binary.AppendUvarint(b, uint64(len(v.Value)))
		for _, x := range v.Value {
			b = appendAttr(b, x)
		}
		return b
	case *types.AttributeValueMemberM:
		b = append(b, 'M')
		b = binary.AppendUvarint(b, uint64(len(v.Value)))
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			b = str(b, 0, k)
			b = appendAttr(b, v.Value[k])
		}
		return b
	default:
		return str(b, '?', fmt.Sprintf("%T", v))
	}
}

// condition returns the condition that holds exactly while the item is
// still this foreign item, live at now: it exists, each of its raw
// attributes is what was read (by type and value) or still absent, and a
// numeric expiresAt is after now. It adds its names and values to the
// maps, under #f… and :f… names of its own.
func (f *foreign) condition(names map[string]string, values map[string]types.AttributeValue) string {
	names["#pk"] = AttrKey
	c := &condBuilder{names: names, values: values, budget: maxConditionTerms}
	parts := []string{"attribute_exists(#pk)"}
	for i, name := range foreignAttrs {
		n := "#f" + strconv.Itoa(i)
		names[n] = name
		v, ok := f.raw[name]
		if !ok {
			parts = append(parts, "attribute_not_exists("+n+")")
			continue
		}
		parts = append(parts, c.equal(n, v)...)
		if _, num := v.(*types.AttributeValueMemberN); num && name == AttrExpiresAt {
			parts = append(parts, n+" > :now")
		}
	}
	return strings.Join(parts, " AND ")
}

// maxConditionTerms bounds the terms condition spends on the contents of
// lists, maps and sets, within DynamoDB's 4 KB expressions: beyond it a
// container is matched by its type and size only.
const maxConditionTerms = 48

// condBuilder writes equality on an attribute value as terms every
// DynamoDB-compatible server evaluates alike: "=" on scalars (dynalite
// compares lists and maps by reference, so "=" on them never holds), and
// on a container its type, its size and each element by path (a set: each
// member by contains()), recursively.
type condBuilder struct {
	names  map[string]string
	values map[string]types.AttributeValue
	n      int // values and names made
	budget int
}

func (c *condBuilder) value(v types.AttributeValue) string {
	c.n++
	k := ":f" + strconv.Itoa(c.n)
	c.values[k] = v
	return k
}

func (c *condBuilder) name(s string) string {
	c.n++
	k := "#g" + strconv.Itoa(c.n)
	c.names[k] = s
	return k
}

func (c *condBuilder) equal(path string, v types.AttributeValue) []string {
	typeAndSize := func(t string, n int) []string {
		return []string{
			fmt.Sprintf("attribute_type(%s, %s)", path, c.value(&types.AttributeValueMemberS{Value: t})),
			fmt.Sprintf("size(%s) = %s", path, c.value(&types.AttributeValueMemberN{Value: strconv.Itoa(n)})),
		}
	}
	members := func(t string, n int, each func(add func(types.AttributeValue))) []string {
		terms := typeAndSize(t, n)
		if c.budget < n {
			return terms
		}
		c.budget -= n
		each(func(m types.AttributeValue) {
			terms = append(terms, fmt.Sprintf("contains(%s, %s)", path, c.value(m)))
		})
		return terms
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberNULL:
		return []string{fmt.Sprintf("attribute_type(%s, %s)", path, c.value(&types.AttributeValueMemberS{Value: "NULL"}))}
	case *types.AttributeValueMemberL:
		terms := typeAndSize("L", len(v.Value))
		if c.budget < len(v.Value) {
			return terms
		}
		c.budget -= len(v.Value)
		for i, e := range v.Value {
			terms = append(terms, c.equal(fmt.Sprintf("%s[%d]", path, i), e)...)
		}
		return terms
	case *types.AttributeValueMemberM:
		terms := typeAndSize("M", len(v.Value))
		if c.budget < len(v.Value) {
			return terms
		}
		c.budget -= len(v.Value)
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			terms = append(terms, c.equal(path+"."+c.name(k), v.Value[k])...)
		}
		return terms
	case *types.AttributeValueMemberSS:
		return members("SS", len(v.Value), func(add func(types.AttributeValue)) {
			for _, m := range v.Value {
				add(&types.AttributeValueMemberS{Value: m})
			}
		})
	case *types.AttributeValueMemberNS:
		return members("NS", len(v.Value), func(add func(types.AttributeValue)) {
			for _, m := range v.Value {
				add(&types.AttributeValueMemberN{Value: m})
			}
		})
	case *types.AttributeValueMemberBS:
		return members("BS", len(v.Value), func(add func(types.AttributeValue)) {
			for _, m := range v.Value {
				add(&types.AttributeValueMemberB{Value: m})
			}
		})
	default:
		return []string{fmt.Sprintf("%s = %s", path, c.value(v))}
	}
}

// expiryOf is the time from now until the store stops returning it, whose
// raw attributes are av: its logical expiry, or DynamoDB's deletion by a
// numeric purgeAt if sooner (0 once that has passed); driver.NoExpiry when
// it has neither.
func expiryOf(it item, av map[string]types.AttributeValue, now time.Time) time.Duration {
	at := it.expiresAt
	if n, ok := av[AttrPurgeAt].(*types.AttributeValueMemberN); ok {
		at = min(at, ceilNumber(n.Value))
	}
	if at == math.MaxInt64 {
		return driver.NoExpiry
	}
	return max(time.Unix(at, 0).Sub(now), 0)
}
