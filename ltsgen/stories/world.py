"""The world of one story: characters, pet, home, places on the way, the quest, and the long-range facts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ltsgen.stories.facts import FactBook
from ltsgen.stories.vocabulary import BOY_NAMES, COLOURS, GIRL_NAMES, PET_NAMES

# name of the place -> (things seen there, sounds, smells, things done there)
PLACES: dict[str, tuple[str, str, str, str]] = {
    "the park": (
        "swings|green benches|tall trees|kids with kites|ducks on the pond|flower beds",
        "children laughing|birds singing|a dog barking far away|the swings going up and down",
        "fresh grass|sweet flowers|warm bread from a shop",
        "played on the swings|went down the big slide|fed bread to the ducks|ran around the trees",
    ),
    "the forest": (
        "tall trees|soft green ferns|little mushrooms|old logs|pinecones|tree stumps",
        "birds singing|leaves moving in the wind|a woodpecker knocking|a little stream",
        "pine trees|wet leaves|moss and earth",
        "jumped over old logs|picked up pinecones|looked for mushrooms|hid behind the trees",
    ),
    "the river": (
        "smooth stones|little fish|reeds|wooden boats|frogs on the rocks|water birds",
        "the water running fast|frogs singing|a duck quacking|small waves on the shore",
        "cool water|wet stones|green reeds",
        "threw stones into the water|splashed in the shallow water|watched the fish|made little boats of leaves",
    ),
    "the beach": (
        "seashells|crabs|sandcastles|seagulls|big waves|little pools of water",
        "the waves crashing|seagulls calling|the wind on the water",
        "salt and sea|warm sand|seaweed",
        "built a sandcastle|looked for seashells|ran from the waves|dug a deep hole in the sand",
    ),
    "the hill": (
        "yellow flowers|big rocks|sheep|wild berries|old stone walls|tiny white flowers",
        "the wind|sheep calling|a bell far away",
        "grass and flowers|cool wind",
        "rolled down the grass|flew a kite|picked wild berries|looked at the whole town below",
    ),
    "the meadow": (
        "daisies|butterflies|bees|dandelions|little rabbits|wild flowers",
        "bees buzzing|crickets singing|the grass moving",
        "flowers|honey|warm grass",
        "picked daisies|chased butterflies|blew on dandelions|made flower crowns",
    ),
    "the farm": (
        "cows|pigs|hens|piles of hay|little lambs|big barns",
        "cows mooing|hens clucking|a pig snorting|a rooster crowing",
        "hay|fresh milk|apples",
        "fed the hens|petted the lambs|jumped in the hay|helped milk the cow",
    ),
    "the garden": (
        "roses|carrots|tall sunflowers|little bugs|tomatoes|flower pots",
        "bees buzzing|a bird on the fence|the water from the hose",
        "roses|wet earth|mint",
        "watered the plants|picked some carrots|looked for ladybugs|planted some seeds",
    ),
    "the lake": (
        "ducks|little boats|lily pads|swans|tall reeds|wooden docks",
        "ducks quacking|water lapping on the shore|a fish jumping",
        "fresh water|wet wood|green plants",
        "skipped stones|fed the ducks|sat on the dock|went for a ride in a little boat",
    ),
    "the town": (
        "shops|busy streets|people with bags|fountains|street lamps|flower boxes",
        "people talking|a bus going by|the big clock ringing|music from a shop",
        "fresh bread|cake from the bakery|hot soup",
        "looked in the shop windows|bought a sweet bun|sat by the fountain|watched the people",
    ),
    "the cave": (
        "dark rocks|drops of water|bats|shiny stones|long tunnels|cold puddles",
        "water dripping|voices coming back|bats flapping",
        "cold stone|wet earth",
        "called out to hear the echo|looked at the shiny stones|walked with a lantern|counted the bats",
    ),
    "the castle": (
        "high towers|old flags|big gates|long halls|stone stairs|old pictures",
        "the wind in the towers|doors creaking|steps on the stone",
        "old stone|dust|candles",
        "climbed the stone stairs|looked out from the tower|played king and queen|ran down the long hall",
    ),
    "the mountain": (
        "big rocks|goats|narrow paths|tall pine trees|patches of snow|little streams",
        "the cold wind|goats calling|rocks falling far away",
        "snow|pine trees|cold air",
        "climbed up the rocks|looked down at the clouds|made a little snowman|rested on a flat rock",
    ),
    "the orchard": (
        "apple trees|red apples|pears|ladders|baskets|busy bees",
        "bees buzzing|apples falling on the grass|birds in the trees",
        "ripe apples|sweet pears",
        "picked apples|filled a basket|climbed a low tree|ate a sweet pear",
    ),
    "the library": (
        "books|tall shelves|soft chairs|big windows|pictures of animals|quiet corners",
        "pages turning|people whispering|a clock ticking",
        "old books|paper",
        "read a book about dragons|looked at pictures|sat on the soft chairs|found a book about the stars",
    ),
    "the pond": (
        "frogs|lily pads|little fish|dragonflies|tall reeds|ducks",
        "frogs croaking|ducks splashing|the wind in the reeds",
        "mud and water|green plants",
        "watched the frogs jump|counted the fish|sat on a log|floated a leaf boat",
    ),
    "the village": (
        "little houses|old wells|gardens with fences|chimneys|market tables|happy dogs",
        "people saying hello|a bell ringing|children playing",
        "bread|flowers|smoke from a chimney",
        "said hello to the people|got water from the well|looked at the market|played with the village kids",
    ),
    "the zoo": (
        "lions|monkeys|tall giraffes|big elephants|penguins|zebras",
        "monkeys calling|a lion roaring|children laughing|penguins splashing",
        "hay|popcorn|animals",
        "watched the monkeys swing|waved at the elephants|fed the goats|looked at the sleepy lions",
    ),
    "the bakery": (
        "warm buns|big cakes|cookies in rows|jars of jam|loaves of bread|little pies",
        "the oven door|the baker singing|a bell on the door",
        "warm bread|sugar|butter and jam",
        "smelled the fresh bread|watched the baker make buns|shared a cookie|counted the cakes",
    ),
    "the playground": (
        "swings|slides|sandboxes|monkey bars|children|seesaws",
        "children shouting|the swings going up|a ball bouncing",
        "sand|fresh grass|sun on the slide",
        "went down the slide|played on the seesaw|dug in the sandbox|ran around the swings",
    ),
    "the valley": (
        "green fields|little streams|cows|stone bridges|wild flowers|old farms",
        "a stream running|cows mooing far away|birds over the fields",
        "grass|flowers|fresh air",
        "walked along the stream|picked wild flowers|rolled down the grass|looked at the cows",
    ),
    "the waterfall": (
        "big rocks|rainbows in the spray|wet ferns|deep pools|little fish|mossy stones",
        "the water falling|a loud rushing sound|birds over the water",
        "cold water|wet moss",
        "watched the water fall|looked for rainbows|touched the cold water|sat on a wet rock",
    ),
    "the market": (
        "fruit stands|baskets of eggs|piles of apples|people selling bread|flowers in buckets|toys",
        "people calling out|a man singing|bags crinkling",
        "fresh fruit|flowers|warm bread",
        "looked at all the fruit|bought a red apple|said hello to the sellers|tried a sweet plum",
    ),
    "the snowy field": (
        "snowmen|white hills|tracks in the snow|frosty trees|icy puddles|snowballs",
        "snow crunching|the cold wind|children sledding far away",
        "cold air|snow",
        "made snow angels|built a snowman|threw snowballs|slid down a little hill",
    ),
    "the island": (
        "palm trees|big shells|crabs|tall rocks|white birds|little waves",
        "the sea all around|birds calling|the waves",
        "salt|coconut|warm sand",
        "walked around the whole island|looked for shells|sat under a palm tree|waved at the boats",
    ),
}

HERO_KINDS = (
    ("girl", "she"),
    ("girl", "she"),
    ("boy", "he"),
    ("squirrel", None),
    ("lamb", None),
    ("frog", None),
    ("hedgehog", None),
    ("penguin", None),
    ("baby owl", None),
    ("boy", "he"),
    ("bunny", None),
    ("bear", None),
    ("mouse", None),
    ("kitten", None),
    ("duck", None),
    ("fox", None),
)
PET_KINDS = {
    "dog": "barked|yapped|howled",
    "puppy": "barked|yapped|whined",
    "cat": "meowed|purred|hissed",
    "kitten": "meowed|purred|mewed",
    "bunny": "squeaked|thumped {P_his} foot|twitched {P_his} nose",
    "duck": "quacked|flapped {P_his} wings|honked",
    "parrot": "squawked|sang|whistled",
    "turtle": "poked {P_his} head out|blinked slowly|hid in {P_his} shell",
    "goat": "bleated|kicked {P_his} legs|nibbled the grass",
}
TRAITS = (
    "kind",
    "brave",
    "curious",
    "shy",
    "happy",
    "clever",
    "friendly",
    "gentle",
    "funny",
    "helpful",
    "polite",
    "silly",
    "careful",
)
FAV_OBJECTS = (
    "kite",
    "ball",
    "hat",
    "scarf",
    "bucket",
    "teddy bear",
    "drum",
    "toy boat",
    "cup",
    "crayon",
    "whistle",
    "ribbon",
    "toy car",
    "little bell",
    "marble",
)
QUEST_OBJECTS = (
    "key",
    "box",
    "ring",
    "shell",
    "feather",
    "stone",
    "button",
    "bell",
    "crown",
    "marble",
    "ribbon",
    "egg",
    "flower",
    "book",
    "lantern",
)
HIDING_PLACES = (
    "under the old bench",
    "behind the big flower pot",
    "inside an old boot",
    "under the bed",
    "behind the barn",
    "in the hollow tree",
    "under the porch steps",
    "in the tall grass by the gate",
    "under a big stone by the door",
    "in a box under the stairs",
    "behind the kitchen door",
    "inside the old well",
    "under the apple tree",
    "in the bird house",
    "between two big rocks",
    "under a pile of leaves",
    "on the top shelf",
    "inside the toy box",
    "behind the fence",
    "in a hole by the river",
)
PROMISES = (
    "pretty shell",
    "basket of berries",
    "big pinecone",
    "smooth stone",
    "bunch of flowers",
    "long feather",
    "jar of honey",
    "shiny pebble",
    "little drawing",
    "red apple",
    "funny story",
    "song about the sea",
    "yellow leaf",
    "snail shell",
)
SECRET_WORDS = (
    "sunflower",
    "pancake",
    "rainbow",
    "cupcake",
    "snowflake",
    "thunder",
    "honey",
    "marble",
    "pumpkin",
    "butterfly",
    "button",
    "cookie",
    "teapot",
    "starfish",
    "dandelion",
    "bubbles",
)
NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
HELPER_KINDS = (
    ("owl", "an old owl"),
    ("turtle", "a wise old turtle"),
    ("farmer", "a kind farmer"),
    ("bear", "a big gentle bear"),
    ("lady", "a kind old lady"),
    ("deer", "a quiet deer"),
    ("goat", "a friendly goat"),
    ("fisherman", "an old fisherman"),
)
COMPANION_KINDS = (
    "duck",
    "frog",
    "squirrel",
    "rabbit",
    "mouse",
    "hedgehog",
    "robin",
    "lamb",
    "fox",
    "beetle",
    "snail",
    "turtle",
    "crow",
    "goose",
    "bee",
    "ladybug",
    "deer",
    "badger",
    "beaver",
    "crab",
)
HOME_PEOPLE = ("Mom", "Dad", "Grandma", "Grandpa")

PRONOUNS = {"she": ("she", "She", "her", "Her", "her"), "he": ("he", "He", "his", "His", "him")}


@dataclass
class Character:
    name: str  # the name as written, or a fact placeholder that resolves to it
    kind: str
    pronoun: str  # "she" or "he"

    def slots(self, role: str) -> dict[str, str]:
        he, he_cap, his, his_cap, him = PRONOUNS[self.pronoun]
        return {
            role: self.name,
            f"{role}_he": he,
            f"{role}_He": he_cap,
            f"{role}_his": his,
            f"{role}_His": his_cap,
            f"{role}_him": him,
            f"{role}_kind": self.kind,
        }


@dataclass
class World:
    hero: Character
    friend: Character
    helper: Character
    helper_intro: str  # "an old owl"
    pet: Character
    pet_sounds: tuple[str, ...]
    home_person: str
    fav_object: str
    quest_object: str
    places: list[str]  # journey order, places repeat in long stories
    companions: list[Character]  # met on the way, one fact each
    facts: FactBook
    placeholders: dict[str, str]  # fact slot -> placeholder
    colours: tuple[str, ...]  # colours free for descriptions (fact colours excluded)
    names_used: set[str] = field(default_factory=set)


def _pick_name(rng: random.Random, pool: tuple[str, ...], used: set[str]) -> str:
    name = rng.choice(pool)
    while name in used:
        name = rng.choice(pool)
    used.add(name)
    return name


def build_world(rng: random.Random, num_places: int, num_companions: int) -> World:
    """Sample the world of one story and register its long-range facts (in the order they are introduced)."""
    used: set[str] = set()
    kind, pronoun = rng.choice(HERO_KINDS)
    pronoun = pronoun or rng.choice(("she", "he"))
    hero_pool = GIRL_NAMES if pronoun == "she" else BOY_NAMES
    hero = Character(_pick_name(rng, hero_pool, used), kind, pronoun)
    facts = FactBook()
    ph: dict[str, str] = {}
    fact_colours = rng.sample([c for c in COLOURS if c[0] not in "aeiou"], 4)  # "a red", never "a orange"
    pet_kind = rng.choice(tuple(k for k in PET_KINDS if k != kind))
    pet_pronoun = rng.choice(("she", "he"))
    pet_name = _pick_name(rng, PET_NAMES, used)
    ph["Pn"] = facts.add("pet_name", pet_name)
    ph["NUM"] = facts.add("pet_spots", rng.choice(NUMBERS))
    ph["HC"] = facts.add("home_colour", fact_colours[0])
    friend_pronoun = rng.choice(("she", "he"))
    friend_name = _pick_name(rng, GIRL_NAMES if friend_pronoun == "she" else BOY_NAMES, used)
    ph["F"] = facts.add("friend_name", friend_name)
    ph["FC"] = facts.add("favourite_colour", fact_colours[1])
    ph["QC"] = facts.add("quest_colour", fact_colours[2])
    ph["HID"] = facts.add("hiding_place", rng.choice(HIDING_PLACES))
    ph["PROM"] = facts.add("promise", rng.choice(PROMISES))
    ph["WORD"] = facts.add("secret_word", rng.choice([w for w in SECRET_WORDS if w != pet_name.lower()]))
    helper_kind, helper_intro = rng.choice(HELPER_KINDS)
    helper_pronoun = "she" if helper_kind == "lady" else rng.choice(("she", "he"))
    helper_name = _pick_name(rng, GIRL_NAMES if helper_pronoun == "she" else BOY_NAMES, used)
    ph["G"] = facts.add("helper_name", helper_name)
    companions = []
    for number in range(num_companions):
        pronoun_c = rng.choice(("she", "he"))
        name = _pick_name(rng, GIRL_NAMES + BOY_NAMES if len(used) < 60 else PET_NAMES, used)
        placeholder = facts.add(f"companion_{number + 1}_name", name)
        companions.append(Character(placeholder, rng.choice(COMPANION_KINDS), pronoun_c))
    names = list(PLACES)
    rng.shuffle(names)
    places = [names[i % len(names)] for i in range(num_places)]
    return World(
        hero=hero,
        friend=Character(
            ph["F"],
            ("girl" if friend_pronoun == "she" else "boy") if kind in ("girl", "boy") else kind,
            friend_pronoun,
        ),
        helper=Character(ph["G"], helper_kind, helper_pronoun),
        helper_intro=helper_intro,
        pet=Character(ph["Pn"], pet_kind, pet_pronoun),
        pet_sounds=tuple(PET_KINDS[pet_kind].split("|")),
        home_person=rng.choice(HOME_PEOPLE),
        fav_object=rng.choice(FAV_OBJECTS),
        quest_object=rng.choice(QUEST_OBJECTS),
        places=places,
        companions=companions,
        facts=facts,
        placeholders=ph,
        colours=tuple(c for c in COLOURS if c not in fact_colours[:3] and c[0] not in "aeiou"),
        names_used=used,
    )
