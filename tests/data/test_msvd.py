"""MSVD captions (acvi_tf.data.msvd): tokenization, both readers, both splits."""

import pytest

from acvi_tf.data import msvd, sources
from acvi_tf.data.sources import DataError

# A tiny AllVideoDescriptions.txt in the UT release's layout (comment header, then
# "<YouTubeID>_<start>_<end> <description>"; no language column).
ALL_DESCRIPTIONS = """\
# Microsoft Research Video Description Corpus -- test fixture
# VideoID_START_END Description
-4wsuPCjDBc_5_15 A squirrel is eating a peanut in it's shell.
-4wsuPCjDBc_5_15 a chipmunk is eating
-7KMZQEsJW4_205_208 a woman is dancing, happily!

zzzUnknown00_1_2 this clip is not in the mapping
-7KMZQEsJW4_205_208 ...
"""

# The same with a language column, as in the multilingual corpus.
ALL_DESCRIPTIONS_LANG = """\
# VideoID_START_END Language Description
-4wsuPCjDBc_5_15 English A squirrel is eating a peanut.
-4wsuPCjDBc_5_15 Spanish Una ardilla come un cacahuete.
-7KMZQEsJW4_205_208 English A woman dances.
-7KMZQEsJW4_205_208 German Eine Frau tanzt.
"""

MAPPING = "-4wsuPCjDBc_5_15 vid1\n-7KMZQEsJW4_205_208 vid2\n"


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_tokenize_is_wordpunct_lowercased():
    assert msvd.tokenize("A Squirrel's eating, a peanut!") == [
        "a", "squirrel", "'", "s", "eating", ",", "a", "peanut", "!"]
    assert msvd.tokenize("a man  is\tcooking") == ["a", "man", "is", "cooking"]


def test_registered_source():
    src = sources.get("msvd")
    assert src.file("sents_train_lc_nopunc.txt").lines == 48_774
    assert src.file("sents_val_lc_nopunc.txt").lines == 4_290
    assert src.file("sents_test_lc_nopunc.txt").lines == 27_763
    assert src.file("youtube_video_to_id_mapping.txt").lines == 1_970
    assert src.file("AllVideoDescriptions.txt").url.endswith("AllVideoDescriptions.txt")
    assert "AllVideoDescriptions.txt" in src.how_to_get


def test_split_schemes():
    paper, s2vt = msvd.split_clips("paper"), msvd.split_clips("s2vt")
    assert [len(paper[s]) for s in ("train", "val", "test")] == [1200, 100, 600]
    assert [len(s2vt[s]) for s in ("train", "val", "test")] == [1200, 100, 670]
    assert paper["train"][0] == "vid1" and paper["train"][-1] == "vid1200"
    assert paper["val"] == [f"vid{i}" for i in range(1201, 1301)]
    assert paper["test"][0] == "vid1371" and paper["test"][-1] == "vid1970"
    assert s2vt["test"][0] == "vid1301"
    # The paper's 1,200 + 100 + 600 = 1,900 clips leave out exactly vid1301..vid1370.
    used = set(paper["train"]) | set(paper["val"]) | set(paper["test"])
    everything = {f"vid{i}" for i in range(1, 1971)}
    assert sorted(everything - used, key=msvd.vid_number) == list(msvd.PAPER_DROPPED_CLIPS)
    assert len(msvd.PAPER_DROPPED_CLIPS) == 70
    with pytest.raises(ValueError, match="unknown MSVD split scheme"):
        msvd.split_clips("yao")


def test_all_video_descriptions_fixture(tmp_path):
    path = _write(tmp_path, "AllVideoDescriptions.txt", ALL_DESCRIPTIONS)
    mapping = msvd.read_mapping(_write(tmp_path, "map.txt", MAPPING))
    rows, stats = msvd.read_all_video_descriptions(path, mapping)
    assert rows == [
        ("vid1", ["a", "squirrel", "is", "eating", "a", "peanut", "in", "it", "'", "s",
                  "shell", "."]),
        ("vid1", ["a", "chipmunk", "is", "eating"]),
        ("vid2", ["a", "woman", "is", "dancing", ",", "happily", "!"]),
        ("vid2", ["..."]),
    ]
    assert not stats.language_column
    assert stats.comments == 2 and stats.kept == 4
    assert stats.unmapped == 1 and stats.unmapped_clips == {"zzzUnknown00_1_2"}

    caps = msvd.load_captions("all_descriptions", paths={
        "descriptions": path, "mapping": str(tmp_path / "map.txt")})
    assert sorted(caps) == ["vid1", "vid2"] and len(caps["vid1"]) == 2


def test_all_video_descriptions_language_column(tmp_path):
    path = _write(tmp_path, "AllVideoDescriptions.txt", ALL_DESCRIPTIONS_LANG)
    mapping = msvd.read_mapping(_write(tmp_path, "map.txt", MAPPING))
    rows, stats = msvd.read_all_video_descriptions(path, mapping)
    assert stats.language_column
    assert rows == [("vid1", ["a", "squirrel", "is", "eating", "a", "peanut", "."]),
                    ("vid2", ["a", "woman", "dances", "."])]
    assert stats.non_english == 2
    assert stats.languages == {"English": 2, "Spanish": 1, "German": 1}
    # Forcing "no language column" keeps the language word as part of the text.
    rows, _ = msvd.read_all_video_descriptions(path, mapping, language_column=False)
    assert len(rows) == 4 and rows[0][1][0] == "english"


def test_readers_name_bad_file_and_line(tmp_path):
    mapping = msvd.read_mapping(_write(tmp_path, "map.txt", MAPPING))
    bad = _write(tmp_path, "bad.txt", "# header\n-4wsuPCjDBc_5_15 fine\nnot-a-clip-name text\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: expected '<YouTubeID>_<start>_<end>"):
        msvd.read_all_video_descriptions(bad, mapping)
    sents = _write(tmp_path, "sents.txt", "vid1\ta dog runs\nvid2 a cat sleeps\n")
    with pytest.raises(DataError, match=r"sents\.txt:2: expected 'vidN<TAB>caption'"):
        msvd.read_s2vt_captions(sents)
    dup = _write(tmp_path, "dupmap.txt", MAPPING + "other_1_2 vid1\n")
    with pytest.raises(DataError, match=r"dupmap\.txt:3: vid1 already used on line 1"):
        msvd.read_mapping(dup)


def test_s2vt_reader_and_split_objects(tmp_path):
    path = _write(tmp_path, "sents.txt", "vid1\ta dog runs\nvid1\tthe dog is running\n"
                                         "vid2\ta cat sleeps\n")
    rows = msvd.read_s2vt_captions(path)
    assert rows == [("vid1", ["a", "dog", "runs"]), ("vid1", ["the", "dog", "is", "running"]),
                    ("vid2", ["a", "cat", "sleeps"])]
    split = msvd.CaptionSplit("toy", ["vid1", "vid2"],
                              {"vid1": [r[1] for r in rows[:2]], "vid2": [rows[2][1]]})
    assert split.pairs() == rows and split.num_captions == 3
    assert split.references() == {"vid1": ["a dog runs", "the dog is running"],
                                  "vid2": ["a cat sleeps"]}
    vocab = msvd.build_vocab(split)
    assert vocab.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    # "a" and "dog" occur twice (ties break alphabetically), the rest once.
    assert vocab.tokens[4:6] == ["a", "dog"] and len(vocab) == 4 + 8
    assert msvd.build_vocab(split, min_count=2).tokens[4:] == ["a", "dog"]
    dec_in, target = msvd.encode_pair(["a", "dog", "flies"], vocab)
    assert dec_in[0] == vocab.bos_id and target[-1] == vocab.eos_id
    assert target[2] == vocab.unk_id and dec_in[1:] == target[:-1]
    assert msvd.encode_pair(["a", "dog", "flies"], vocab, max_len=2) == (dec_in[:2], target[:2])


# ---------------------------------------------------------------- real mirror files

def _have_real_files():
    names = list(msvd.SPLIT_FILES.values()) + [msvd.MAPPING_FILE]
    return all(sources.locate("msvd", n, required=False) for n in names)


real = pytest.mark.skipif(not _have_real_files(),
                          reason="MSVD caption files not found (no ../shared/data mirror)")


@pytest.fixture(scope="module")
def real_captions():
    return msvd.load_captions("s2vt")


@real
def test_real_mapping():
    mapping = msvd.read_mapping()
    assert len(mapping) == 1970
    assert mapping["-4wsuPCjDBc_5_15"] == "vid1"
    assert mapping["zzit5b_-ukg_5_20"] == "vid1970"


@real
def test_real_counts_and_splits(real_captions):
    assert len(real_captions) == 1970
    assert sum(len(v) for v in real_captions.values()) == 48_774 + 4_290 + 27_763
    assert real_captions["vid1"][0] == ["a", "squirrel", "is", "eating", "a", "peanut",
                                        "in", "it", "s", "shell"]

    s2vt = msvd.load_splits("s2vt", captions=real_captions)
    assert [len(s2vt[s].clips) for s in ("train", "val", "test")] == [1200, 100, 670]
    assert [s2vt[s].num_captions for s in ("train", "val", "test")] == [48_774, 4_290, 27_763]

    paper = msvd.load_splits("paper", captions=real_captions)
    assert [len(paper[s].clips) for s in ("train", "val", "test")] == [1200, 100, 600]
    assert [paper[s].num_captions for s in ("train", "val", "test")] == [48_774, 4_290, 24_669]
    assert sum(len(real_captions[c]) for c in msvd.PAPER_DROPPED_CLIPS) == 3_094

    assert len(paper["train"].pairs()) == 48_774
    refs = paper["test"].references()
    assert len(refs) == 600 and all(refs.values())
    assert len(msvd.build_vocab(paper["train"])) == 9_466  # 9,462 words + 4 specials


@real
def test_real_counts_report():
    lines = msvd.counts_report()
    assert "msvd/sents_train_lc_nopunc.txt: 48,774 lines (complete)" in lines
    assert any("paper test: 600 clips (vid1371..vid1970), 24,669 captions" in l for l in lines)


def test_video_paths_map_clip_files_to_vid_ids(tmp_path):
    videos = tmp_path / "YouTubeClips"
    videos.mkdir()
    (videos / "-4wsuPCjDBc_5_15.avi").write_bytes(b"")
    (videos / "-7KMZQEsJW4_205_208.MP4").write_bytes(b"")  # re-encoded copy, any case
    (videos / "notes.txt").write_text("not a video")
    mapping = {"-4wsuPCjDBc_5_15": "vid1", "-7KMZQEsJW4_205_208": "vid2", "gone_1_2": "vid3"}
    found, missing = msvd.video_paths(str(videos), mapping)
    assert found == {"vid1": str(videos / "-4wsuPCjDBc_5_15.avi"),
                     "vid2": str(videos / "-7KMZQEsJW4_205_208.MP4")}
    assert missing == ["gone_1_2"]
    with pytest.raises(DataError, match="YouTubeClips.tar"):
        msvd.video_paths(str(tmp_path / "nowhere"), mapping)
