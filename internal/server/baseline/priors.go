package baseline

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/plumbline/plumbline/internal/vocab"
)

// Kind is a probe kind (internal/vocab's).
type Kind = vocab.ProbeKind

// Kinds lists the probe kinds that have priors: every kind whose latency
// the detector judges (a priors file must give each a band).
func Kinds() []Kind { return vocab.JudgedProbeKinds() }

// Band is an expected latency range in seconds: Low <= Typical <= High.
type Band struct {
	Low, Typical, High float64
}

func (b Band) scale(low, typical, high float64) Band {
	return Band{Low: b.Low * low, Typical: b.Typical * typical, High: b.High * high}
}

// Expectation is what the priors say about one profile and probe kind.
type Expectation struct {
	Profile string // profile key
	Kind    Kind
	// Band is the expected latency, misalignment penalty included.
	Band Band
	// Aligned is the band the same profile would have if aligned.
	Aligned Band
	// Penalty is the predicted latency increase from split I/Os
	// (split_access_share × Split8K): Band = Aligned × (1 + Penalty).
	Penalty float64
	// Sources cite the media band, the RAID factor and the penalty model.
	Sources []string
}

// Priors are the expected bands per media class and RAID level. Build one
// with ParsePriors or DefaultPriors; it is read-only afterwards and safe
// for concurrent use.
type Priors struct {
	media map[Media]mediaPriors
	raid  map[string]raidPriors
}

type mediaPriors struct {
	share       float64
	shareSource string
	bands       map[Kind]Band
	sources     map[Kind]string
}

type raidPriors struct {
	source  string
	factors map[Kind]Band
	sources map[Kind]string
}

//go:embed priors.yaml
var defaultPriors []byte

// DefaultPriors parses the priors shipped with Plumbline (priors.yaml).
func DefaultPriors() (*Priors, error) {
	p, err := ParsePriors(defaultPriors)
	if err != nil {
		return nil, fmt.Errorf("embedded priors.yaml: %w", err)
	}
	return p, nil
}

// ErrInvalidPriors wraps every error ParsePriors returns.
var ErrInvalidPriors = errors.New("invalid priors")

// The file's shape (see the header of priors.yaml).
type priorsFile struct {
	Version int                  `yaml:"version"`
	Media   map[string]mediaFile `yaml:"media"`
	RAID    map[string]raidFile  `yaml:"raid"`
}

// mediaFile: a split_access_share and a band per probe kind, keyed by
// the kind's name with underscores (random_read).
type mediaFile struct {
	SplitAccessShare *shareFile                     `yaml:"split_access_share"`
	Kinds            map[string]*bandFile[duration] `yaml:",inline"`
}

type shareFile struct {
	Value  *float64 `yaml:"value"`
	Source string   `yaml:"source"`
}

// bandFile is a media band (durations) or a RAID factor (numbers).
type bandFile[T duration | float64] struct {
	Low     *T     `yaml:"low"`
	Typical *T     `yaml:"typical"`
	High    *T     `yaml:"high"`
	Source  string `yaml:"source"`
}

// raidFile: a source and, per probe kind keyed as in mediaFile, a factor
// (absent: 1).
type raidFile struct {
	Source string                        `yaml:"source"`
	Kinds  map[string]*bandFile[float64] `yaml:",inline"`
}

// band checks the file's band: all three values, ordered, positive and
// finite, typical at least minTypical (checkBand), and a source.
func (f *bandFile[T]) band(minTypical float64) (Band, error) {
	if f.Low == nil || f.Typical == nil || f.High == nil {
		return Band{}, errors.New("want low, typical and high")
	}
	b := Band{float64(*f.Low), float64(*f.Typical), float64(*f.High)}
	if err := checkBand(b, minTypical); err != nil {
		return Band{}, err
	}
	if strings.TrimSpace(f.Source) == "" {
		return Band{}, errors.New("missing source")
	}
	return b, nil
}

// unknownKinds reports the keys of a per-kind map that name no probe kind.
func unknownKinds[V any](where string, m map[string]V, bad func(string, ...any)) {
	for _, key := range sortedKeys(m) {
		if !slices.ContainsFunc(Kinds(), func(k Kind) bool { return yamlKind(k) == key }) {
			bad("%s.%s: unknown key (probe kinds: %s)", where, key, strings.Join(yamlKinds(), ", "))
		}
	}
}

func yamlKinds() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, yamlKind(k))
	}
	return out
}

// duration is a Go duration string in the file, seconds in memory. A bare
// number is refused: its unit would be a guess.
type duration float64

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("line %d: %q: want a duration with a unit (4.2ms, 90us)", n.Line, n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = duration(v.Seconds())
	return nil
}

// ParsePriors parses and validates a priors file: every media class with
// a split_access_share and a band for each probe kind, RAID levels from
// the known set ("none" required), bands and factors ordered and
// positive, a source on every band, factor and share, no unknown keys.
func ParsePriors(b []byte) (*Priors, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f priorsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPriors, err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Version != 1 {
		bad("version %d: want 1", f.Version)
	}
	p := &Priors{media: map[Media]mediaPriors{}, raid: map[string]raidPriors{}}
	for _, name := range sortedKeys(f.Media) {
		m, err := ParseMedia(name)
		if err != nil {
			bad("media: %w", err)
			continue
		}
		p.media[m] = parseMedia(name, f.Media[name], bad)
	}
	for _, m := range MediaClasses() {
		if _, ok := f.Media[string(m)]; !ok {
			bad("media.%s: missing", m)
		}
	}
	for _, lvl := range sortedKeys(f.RAID) {
		if levels := vocab.RAIDLevels(); !slices.Contains(levels, lvl) {
			bad("raid: level %q: want one of %v", lvl, levels)
			continue
		}
		p.raid[lvl] = parseRAID(lvl, f.RAID[lvl], bad)
	}
	if _, ok := f.RAID[NoRAID]; !ok {
		bad("raid.%s: missing", NoRAID)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPriors, errors.Join(errs...))
	}
	return p, nil
}

// parseMedia reads one media class: its split-access share and a band
// for every probe kind.
func parseMedia(name string, mf mediaFile, bad func(string, ...any)) mediaPriors {
	mp := mediaPriors{bands: map[Kind]Band{}, sources: map[Kind]string{}}
	switch s := mf.SplitAccessShare; {
	case s == nil || s.Value == nil:
		bad("media.%s.split_access_share: missing value", name)
	case !(*s.Value >= 0 && *s.Value <= 1):
		bad("media.%s.split_access_share: %v: want 0 to 1", name, *s.Value)
	case strings.TrimSpace(s.Source) == "":
		bad("media.%s.split_access_share: missing source", name)
	default:
		mp.share, mp.shareSource = *s.Value, s.Source
	}
	unknownKinds("media."+name, mf.Kinds, bad)
	for _, k := range Kinds() {
		where := fmt.Sprintf("media.%s.%s", name, yamlKind(k))
		bf := mf.Kinds[yamlKind(k)]
		if bf == nil {
			bad("%s: missing", where)
			continue
		}
		band, err := bf.band(0)
		if err != nil {
			bad("%s: %w", where, err)
			continue
		}
		mp.bands[k], mp.sources[k] = band, bf.Source
	}
	return mp
}

// parseRAID reads one RAID level: its source and a factor per probe kind
// (1 where the file gives none).
func parseRAID(lvl string, rf raidFile, bad func(string, ...any)) raidPriors {
	if strings.TrimSpace(rf.Source) == "" {
		bad("raid.%s: missing source", lvl)
	}
	rp := raidPriors{source: rf.Source, factors: map[Kind]Band{}, sources: map[Kind]string{}}
	unknownKinds("raid."+lvl, rf.Kinds, bad)
	for _, k := range Kinds() {
		where := fmt.Sprintf("raid.%s.%s", lvl, yamlKind(k))
		ff := rf.Kinds[yamlKind(k)]
		if ff == nil {
			rp.factors[k], rp.sources[k] = Band{1, 1, 1}, rf.Source
			continue
		}
		band, err := ff.band(1)
		if err != nil {
			bad("%s: %w", where, err)
			continue
		}
		rp.factors[k], rp.sources[k] = band, ff.Source
	}
	return rp
}

// checkBand wants 0 < low <= typical <= high, all finite, and typical >=
// minTypical when minTypical > 0 (RAID factors never make a volume faster).
func checkBand(b Band, minTypical float64) error {
	for _, v := range []float64{b.Low, b.Typical, b.High} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%v: want positive finite values", v)
		}
	}
	if !(b.Low <= b.Typical && b.Typical <= b.High) {
		return fmt.Errorf("low %v, typical %v, high %v: want low <= typical <= high", b.Low, b.Typical, b.High)
	}
	if b.Typical < minTypical {
		return fmt.Errorf("typical %v: want at least %v", b.Typical, minTypical)
	}
	return nil
}

func yamlKind(k Kind) string { return strings.ReplaceAll(string(k), "-", "_") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ErrNoPrior is returned by Expect for a kind or media class the priors
// do not cover.
var ErrNoPrior = errors.New("no prior")

// Penalty is the split-I/O model: the predicted latency increase of a
// volume of media class m whose 8 KiB I/Os split with probability split.
func (p *Priors) Penalty(m Media, split float64) float64 {
	if !(split > 0) {
		return 0
	}
	return p.media[m].share * math.Min(split, 1)
}

// Expect is the expected band for a profile and probe kind: the media
// band × the RAID level's factor × (1 + Penalty) for the random kinds.
// A RAID level the file does not list is priced as "none" (and the
// sources say so). Log writes carry no penalty (DESIGN.md: offset makes no
// difference to sequential log writes).
func (p *Priors) Expect(prof Profile, kind Kind) (Expectation, error) {
	media := prof.Media
	if media == "" {
		media = UnknownMedia
	}
	mp, ok := p.media[media]
	if !ok {
		return Expectation{}, fmt.Errorf("%w for media class %q", ErrNoPrior, media)
	}
	band, ok := mp.bands[kind]
	if !ok {
		return Expectation{}, fmt.Errorf("%w for probe kind %q", ErrNoPrior, kind)
	}
	e := Expectation{Profile: prof.Key(), Kind: kind}
	e.Sources = append(e.Sources, fmt.Sprintf("%s %s: %s", media, kind, mp.sources[kind]))
	lvl := strings.ToLower(prof.RAIDLevel)
	if lvl == "" {
		lvl = NoRAID
	}
	rp, ok := p.raid[lvl]
	if !ok {
		rp = p.raid[NoRAID]
		e.Sources = append(e.Sources, fmt.Sprintf("raid level %q has no prior: priced as %s", lvl, NoRAID))
	}
	f := rp.factors[kind]
	e.Aligned = band.scale(f.Low, f.Typical, f.High)
	e.Sources = append(e.Sources, fmt.Sprintf("%s %s ×%g: %s", lvl, kind, f.Typical, rp.sources[kind]))
	if kind.Spec().Access == vocab.AccessRandom {
		e.Penalty = p.Penalty(media, prof.Split8K)
	}
	if e.Penalty > 0 {
		e.Sources = append(e.Sources, fmt.Sprintf("misalignment: %.3g split × %.2g access share = +%.1f%%: %s",
			prof.Split8K, mp.share, e.Penalty*100, mp.shareSource))
	}
	k := 1 + e.Penalty
	e.Band = e.Aligned.scale(k, k, k)
	return e, nil
}
