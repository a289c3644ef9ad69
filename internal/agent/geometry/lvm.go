package geometry

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// LVM text metadata (the format of /etc/lvm/backup/<vg>, lvm.conf(5) syntax):
//
//	vg0 {
//		extent_size = 8192
//		physical_volumes { pv0 { device = "/dev/sdb" pe_start = 2048 } }
//		logical_volumes { data { segment1 {
//			start_extent = 0  extent_count = 100  type = "striped"
//			stripe_count = 2  stripe_size = 128  stripes = ["pv0", 0, "pv1", 0]
//		} } }
//	}
//
// Sizes in the format are in 512-byte sectors.

// lvmMaxDepth bounds section nesting; real metadata nests five deep.
const lvmMaxDepth = 32

// lvmMaxBytes bounds how much of a metadata file is parsed.
const lvmMaxBytes = 8 << 20

// lvmSectorBytes is the unit of extent_size, pe_start and stripe_size.
const lvmSectorBytes = 512

type lvmValue struct {
	Str   string
	Int   int64
	Kind  byte // 's' string, 'i' integer, 'f' other number, 'l' list
	Items []lvmValue
}

type lvmSection struct {
	Name     string
	Values   map[string]lvmValue
	Sections []*lvmSection
}

func (s *lvmSection) section(name string) *lvmSection {
	for _, c := range s.Sections {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (s *lvmSection) str(key string) string {
	if v, ok := s.Values[key]; ok && v.Kind == 's' {
		return v.Str
	}
	return ""
}

func (s *lvmSection) uint(key string) (uint64, bool) {
	if v, ok := s.Values[key]; ok && v.Kind == 'i' && v.Int >= 0 {
		return uint64(v.Int), true
	}
	return 0, false
}

// lvmVG is one volume group of a metadata file.
type lvmVG struct {
	Name       string
	ID         string
	ExtentSize uint64 // sectors
	PVs        map[string]lvmPV
	LVs        []lvmLV
}

type lvmPV struct {
	ID      string
	Device  string
	PEStart uint64 // sectors
}

type lvmLV struct {
	Name     string
	ID       string
	Segments []lvmSegment // sorted by StartExtent
}

type lvmSegment struct {
	StartExtent uint64
	ExtentCount uint64
	Type        string
	StripeCount uint64
	StripeSize  uint64 // sectors
	Stripes     []lvmStripe
}

type lvmStripe struct {
	PV     string
	Extent uint64
}

// parseLVMMetadata parses LVM text metadata and returns the volume groups
// in it (a backup file holds one).
func parseLVMMetadata(b []byte) ([]lvmVG, error) {
	if len(b) > lvmMaxBytes {
		return nil, fmt.Errorf("lvm metadata: %d bytes is more than %d", len(b), lvmMaxBytes)
	}
	p := &lvmParser{src: string(b)}
	root, err := p.body(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, p.errorf("unexpected '}'")
	}
	var vgs []lvmVG
	for _, s := range root.Sections {
		if _, ok := s.Values["extent_size"]; !ok && s.section("physical_volumes") == nil {
			continue
		}
		vg, err := lvmVGFromSection(s)
		if err != nil {
			return nil, err
		}
		vgs = append(vgs, vg)
	}
	if len(vgs) == 0 {
		return nil, errors.New("lvm metadata: no volume group")
	}
	return vgs, nil
}

func lvmVGFromSection(s *lvmSection) (lvmVG, error) {
	vg := lvmVG{Name: s.Name, ID: s.str("id"), PVs: map[string]lvmPV{}}
	es, ok := s.uint("extent_size")
	if !ok || es == 0 {
		return lvmVG{}, fmt.Errorf("lvm metadata: volume group %s: no extent_size", s.Name)
	}
	vg.ExtentSize = es
	if pvs := s.section("physical_volumes"); pvs != nil {
		for _, p := range pvs.Sections {
			pe, _ := p.uint("pe_start")
			vg.PVs[p.Name] = lvmPV{ID: p.str("id"), Device: p.str("device"), PEStart: pe}
		}
	}
	if lvs := s.section("logical_volumes"); lvs != nil {
		for _, l := range lvs.Sections {
			lv := lvmLV{Name: l.Name, ID: l.str("id")}
			for _, seg := range l.Sections {
				if !strings.HasPrefix(seg.Name, "segment") {
					continue
				}
				sg := lvmSegment{Type: seg.str("type")}
				sg.StartExtent, _ = seg.uint("start_extent")
				sg.ExtentCount, _ = seg.uint("extent_count")
				sg.StripeCount, _ = seg.uint("stripe_count")
				sg.StripeSize, _ = seg.uint("stripe_size")
				if st, ok := seg.Values["stripes"]; ok && st.Kind == 'l' {
					for i := 0; i+1 < len(st.Items); i += 2 {
						name, ext := st.Items[i], st.Items[i+1]
						if name.Kind != 's' || ext.Kind != 'i' || ext.Int < 0 {
							return lvmVG{}, fmt.Errorf("lvm metadata: %s/%s/%s: stripes: want \"pvN\", extent pairs", s.Name, l.Name, seg.Name)
						}
						sg.Stripes = append(sg.Stripes, lvmStripe{PV: name.Str, Extent: uint64(ext.Int)})
					}
				}
				lv.Segments = append(lv.Segments, sg)
			}
			sort.SliceStable(lv.Segments, func(i, j int) bool { return lv.Segments[i].StartExtent < lv.Segments[j].StartExtent })
			vg.LVs = append(vg.LVs, lv)
		}
	}
	return vg, nil
}

// dmName is the device-mapper name LVM gives an LV: "<vg>-<lv>" with every
// dash inside either name doubled.
func lvmDMName(vg, lv string) string {
	return strings.ReplaceAll(vg, "-", "--") + "-" + strings.ReplaceAll(lv, "-", "--")
}

// splitDMName splits an LVM dm name "<vg>-<lv>" at the single dash.
func splitDMName(name string) (vg, lv string, ok bool) {
	for i := 0; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		if i+1 < len(name) && name[i+1] == '-' {
			i++
			continue
		}
		return strings.ReplaceAll(name[:i], "--", "-"), strings.ReplaceAll(name[i+1:], "--", "-"), true
	}
	return strings.ReplaceAll(name, "--", "-"), "", false
}

// lvmDataOffset is where the LV's first extent starts on its first PV, in
// bytes: pe_start plus the segment's starting extent on that PV.
func (vg lvmVG) lvmDataOffset(lv lvmLV) (uint64, error) {
	if len(lv.Segments) == 0 {
		return 0, fmt.Errorf("LV %s/%s has no segments", vg.Name, lv.Name)
	}
	seg := lv.Segments[0]
	if len(seg.Stripes) == 0 {
		return 0, fmt.Errorf("LV %s/%s segment type %q has no stripes on physical volumes", vg.Name, lv.Name, seg.Type)
	}
	var off uint64
	for i, st := range seg.Stripes {
		pv, ok := vg.PVs[st.PV]
		if !ok {
			return 0, fmt.Errorf("LV %s/%s: stripe on unknown physical volume %q", vg.Name, lv.Name, st.PV)
		}
		hi, ext := bits.Mul64(st.Extent, vg.ExtentSize)
		sectors, carry := bits.Add64(ext, pv.PEStart, 0)
		hi2, b := bits.Mul64(sectors, lvmSectorBytes)
		if hi != 0 || carry != 0 || hi2 != 0 {
			return 0, fmt.Errorf("LV %s/%s: offset overflows", vg.Name, lv.Name)
		}
		if i > 0 && b != off {
			return 0, fmt.Errorf("LV %s/%s: stripes start at different offsets (%d and %d bytes)", vg.Name, lv.Name, off, b)
		}
		off = b
	}
	return off, nil
}

type lvmParser struct {
	src string
	pos int
}

func (p *lvmParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:min(p.pos, len(p.src))], "\n")
	return fmt.Errorf("lvm metadata line %d: %s", line, fmt.Sprintf(format, args...))
}

// skip moves past blanks and # comments.
func (p *lvmParser) skip() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isLVMWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '+' || c == '/'
}

func (p *lvmParser) word() string {
	start := p.pos
	for p.pos < len(p.src) && isLVMWord(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// body parses items up to a closing '}' (not consumed) or the end.
func (p *lvmParser) body(depth int) (*lvmSection, error) {
	if depth > lvmMaxDepth {
		return nil, p.errorf("sections nest deeper than %d", lvmMaxDepth)
	}
	s := &lvmSection{Values: map[string]lvmValue{}}
	for {
		p.skip()
		if p.pos >= len(p.src) || p.src[p.pos] == '}' {
			return s, nil
		}
		name := p.word()
		if name == "" {
			return nil, p.errorf("unexpected %q", p.src[p.pos])
		}
		p.skip()
		if p.pos >= len(p.src) {
			return nil, p.errorf("%s: unexpected end", name)
		}
		switch p.src[p.pos] {
		case '{':
			p.pos++
			child, err := p.body(depth + 1)
			if err != nil {
				return nil, err
			}
			if p.pos >= len(p.src) {
				return nil, p.errorf("%s: missing '}'", name)
			}
			p.pos++
			child.Name = name
			s.Sections = append(s.Sections, child)
		case '=':
			p.pos++
			v, err := p.value(true)
			if err != nil {
				return nil, err
			}
			s.Values[name] = v
		default:
			return nil, p.errorf("%s: want '=' or '{', got %q", name, p.src[p.pos])
		}
	}
}

func (p *lvmParser) value(listOK bool) (lvmValue, error) {
	p.skip()
	if p.pos >= len(p.src) {
		return lvmValue{}, p.errorf("missing value")
	}
	switch c := p.src[p.pos]; {
	case c == '"':
		return p.str()
	case c == '[' && listOK:
		p.pos++
		v := lvmValue{Kind: 'l'}
		for {
			p.skip()
			if p.pos >= len(p.src) {
				return lvmValue{}, p.errorf("missing ']'")
			}
			if p.src[p.pos] == ']' {
				p.pos++
				return v, nil
			}
			item, err := p.value(false)
			if err != nil {
				return lvmValue{}, err
			}
			v.Items = append(v.Items, item)
			p.skip()
			if p.pos < len(p.src) && p.src[p.pos] == ',' {
				p.pos++
			}
		}
	default:
		w := p.word()
		if w == "" {
			return lvmValue{}, p.errorf("unexpected %q", c)
		}
		if n, err := strconv.ParseInt(w, 10, 64); err == nil {
			return lvmValue{Kind: 'i', Int: n}, nil
		}
		if _, err := strconv.ParseFloat(w, 64); err == nil {
			return lvmValue{Kind: 'f', Str: w}, nil
		}
		return lvmValue{}, p.errorf("value %q is neither a number nor a quoted string", w)
	}
}

func (p *lvmParser) str() (lvmValue, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch c {
		case '"':
			p.pos++
			return lvmValue{Kind: 's', Str: b.String()}, nil
		case '\\':
			if p.pos+1 < len(p.src) {
				p.pos++
				c = p.src[p.pos]
			}
		}
		b.WriteByte(c)
		p.pos++
	}
	return lvmValue{}, p.errorf("unterminated string")
}
