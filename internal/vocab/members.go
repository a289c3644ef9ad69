package vocab

// The words of member I/O (MemberGroup.kind): how a set of devices are
// siblings doing the same kind of work, so that one can be judged against
// the others.

// MemberGroupKind is how a group's members are siblings.
type MemberGroupKind string

// The member group kinds.
const (
	MemberGroupMD        MemberGroupKind = "md"
	MemberGroupMirror    MemberGroupKind = "mirror"
	MemberGroupLVM       MemberGroupKind = "lvm"
	MemberGroupMultipath MemberGroupKind = "multipath"
)

// memberGroupKinds is the one list of member group kinds, each with what
// its members are.
var memberGroupKinds = [...]struct {
	kind MemberGroupKind
	doc  string
}{
	{MemberGroupMD, "the member devices of one md array (md/dev-*)"},
	{MemberGroupMirror, "the legs of one device-mapper mirror or raid1 target"},
	{MemberGroupLVM, "the physical volumes under one striped or mirrored logical volume"},
	{MemberGroupMultipath, "the paths of one multipath device"},
}

// MemberGroupKinds lists every member group kind.
func MemberGroupKinds() []MemberGroupKind {
	out := make([]MemberGroupKind, len(memberGroupKinds))
	for i, g := range memberGroupKinds {
		out[i] = g.kind
	}
	return out
}

// MemberGroupKindNames is MemberGroupKinds as strings.
func MemberGroupKindNames() []string { return names(MemberGroupKinds()) }

// MemberGroupKindDoc says what the members of a group of kind k are; ""
// for an unknown kind.
func MemberGroupKindDoc(k MemberGroupKind) string {
	for _, g := range memberGroupKinds {
		if g.kind == k {
			return g.doc
		}
	}
	return ""
}
