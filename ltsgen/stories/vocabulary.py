"""The vocabulary of a small child, in the spirit of TinyStories (Eldan & Li, 2023).

``NOUNS``, ``VERBS`` and ``ADJECTIVES`` are the headwords the stories are built from (the LLM backend samples
one of each to seed a prompt, as TinyStories did). ``BASIC_WORDS`` holds every lowercase word form a story
may contain apart from names: the headwords with their regular and irregular inflections plus the function
words, numbers, adverbs and time words of simple English. ``NAMES`` are the names of people and animals;
``PET_NAMES`` the names given to pets.
"""

from __future__ import annotations

FEATURES = ("dialogue", "plot twist", "foreshadowing", "conflict", "moral", "bad ending")

NOUNS = tuple(
    """
    apple ant arm baby bag ball balloon banana bank basket bath bear bed bee bell belt bench berry bike bird
    blanket boat body bone book boot bottle bow bowl box boy branch bread bridge brother brush bucket bug
    bus bush butterfly button cake candle candy cap car card carrot castle cat cave chair cheese chicken
    child circle city clock cloud coat cookie corn cow crab crayon crown cup cupcake dad daisy day deer desk
    dinner dog doll door dragon dream dress drum duck egg elephant eye face fairy farm farmer feather fence
    field fire fish flag floor flower fly food foot forest fork fox friend frog game garden gate gift girl
    glass glove goat grandma grandpa grass hair hand hat head heart hen hill hole home honey horse house
    jar jacket juice key king kite kitten knee lake lamb lamp leaf leg lemon letter light lion lunch map
    meadow milk mirror mom monkey moon morning mountain mouse mud nest net night nose nut ocean owl paint
    pan paper park party path peach pear pen pencil penguin picture pie pig pillow plane plant plate pocket
    pond pony pot present prince princess puddle pumpkin puppy queen rabbit rain rainbow ring river road
    robot rock roof room rope rose sand sandwich scarf school sea seed shadow sheep shell ship shoe shop
    sister sky snail snake snow sock song soup spoon star stick stone store storm story sun swing table
    tail teacher teddy tent tiger toy tower town train tree truck turtle umbrella van wagon wall water
    wave well whale wheel wind window wing wolf wood worm yard zoo
    """.split()
)

VERBS = tuple(
    """
    ask bake be climb bring build call carry catch clap clean climb close come count cry cut dance dig do
    draw dream drink drop eat fall feed feel fill find fix fly follow get give go grab grow have help hide
    hold hop hope hug hum hurry jump keep kick kiss knock know laugh learn leave lift like listen live look
    lose love make mean meet miss move need nod open paint pick plant play pull push put rain reach read
    remember rest ride roll run say see sell share shine shout show sing sit skip sleep slide smell smile
    splash stand start stay stop swim take talk taste tell thank think throw tie touch try turn visit
    wait wake walk want wash watch wave wear whisper win wish wonder work worry write yell
    answer arrive beam begin become blow break buy chase cover crack drip end flap float forget frown
    happen hear hiss howl lead lick lie march nibble pack pat pet point poke promise rub scratch set shake
    shape slip split stomp stretch tilt twitch use whine whistle yawn ring bleat cluck croak moo snort squawk
    tick hurt name guess crash bubble lap reply wink quack water thump creak warm yap
    block bounce brush change crinkle crow honk mew roar rush step
    collect cross mix spin tap join teach bet snow understand
    """.split()
)
VERBS = tuple(dict.fromkeys(VERBS))

ADJECTIVES = tuple(
    """
    angry bad beautiful best big black blue brave bright brown busy calm careful clean clever cold cool
    cozy curious dark deep dirty dry early easy empty fast fat fine first fluffy friendly full funny fuzzy
    gentle gold good gray great green happy hard heavy helpful high hot huge hungry kind large last lazy
    light little lonely long loud lucky magic mean messy new nice noisy old orange pink polite poor pretty
    proud purple quick quiet ready real red rich round sad safe scared shiny short shy silly silver simple
    slow small smart smooth soft sorry special sticky strong sunny sweet tall thin thirsty tiny tired warm
    weak wet white wide wild windy wise wonderful worried yellow young
    """.split()
)

COLOURS = (
    "red",
    "blue",
    "green",
    "yellow",
    "pink",
    "purple",
    "orange",
    "white",
    "black",
    "brown",
    "gold",
    "silver",
)

GIRL_NAMES = tuple(
    """
    Lily Mia Sue Anna Emma Lucy Ella Amy Rosa Zoe Nina Kate Ruby Jane Molly Daisy Sara Lena Maya Tina Ivy
    Clara Nora Hannah Grace Olive Rose Bella Sophie Ada Leah Mila Alice Jenny Polly Kim Hazel Iris Luna Fern
    Beth Cora Dora Eva Gina Holly Isla Jade Julia Kelly Lola Mary Nell Pam Rita Sally Tess Vera Wendy Abby
    Amber April Bonnie Carla Chloe Dana Edie Elsa Emily Erin Faye Flora Gemma Greta Heidi Helen Ida Jess
    Joy Judy Kara Katie Laura Lila Lisa Lottie Lucia Mabel Maggie Maria Marta Megan Millie Minnie Nadia
    Naomi Nancy Nico Norah Paige Penny Phoebe Piper Quinn Rachel Rena Rhea Rosie Ruth Sadie Sienna Stella
    Susie Tara Thea Tilly Uma Violet Willa Yara Zara Zelda Anya Bea Cleo Dinah Eliza Esme Freya Hattie
    Inez Josie Kira Lacey Leila Mara Nola Opal Pia Rosalie Selma Tamsin Una Winnie Wren
    """.split()
)
BOY_NAMES = tuple(
    """
    Tom Ben Sam Max Tim Jack Leo Finn Jake Luke Noah Eli Theo Owen Adam Oscar Milo Ned Toby Hugo Alex Ryan
    Joe Paul Dan Nick Ollie Liam Henry Jonah Pete Billy Teddy Oli Cody Felix Omar Ravi Kai Zack
    Andy Bobby Carl Dave Eddie Frank Gus Harry Ivan Jimmy Kevin Larry Mark Nate Otto Percy Rob Stan Vic Will
    Aaron Abe Alfie Archie Arlo Barry Bert Brian Caleb Charlie Chris Colin Dean Dexter Dylan Eric Ethan
    Evan Ezra Fred George Grant Hank Isaac Jasper Jay Jesse Joel Jonas Kit Lenny Leon Louis Lucas Marco
    Martin Miles Nathan Neil Niko Ollie Oren Pablo Peter Phil Quentin Ralph Reed Rex Rory Rudy Ruben Seth
    Simon Sol Ted Tobias Tony Troy Vince Wade Walter Wes Yusuf Zeke Ari Benny Cal Dario Emil Enzo Ezio
    Gil Ike Jed Levi Mo Moss Pax Roy Sid Tad Ugo Vito Wally
    """.split()
)
PET_NAMES = tuple(
    """
    Biscuit Pip Coco Bubbles Sparky Patch Peanut Muffin Pepper Buttons Ziggy Noodle Pickles Sunny Bingo
    Fluffy Socks Tiny Rocky Ginger Mittens Bruno Daisy Pebble Lucky Oreo Toffee Rusty Bean Waffles Honey
    Puff Scout Jelly Maple Cookie Boots Dot Sprout Chip
    Button Fudge Nugget Pumpkin Snowy Shadow Smudge Sparkle Sugar Twinkle Wiggles Zippy Barney Clover Dash
    Flash Goldie Marble Nibbles Poppy
    Acorn Bandit Banjo Blossom Bonbon Bramble Buddy Buster Caramel Cinnamon Cocoa Comet Cupcake Dottie
    Dumpling Fizz Freckles Fuzzy Gizmo Gumdrop Hazelnut Jellybean Jingles Juniper Kiwi Lolly Mango
    Marshmallow Meatball Mocha Mochi Mopsy Nutmeg Olive Paws Pebbles Pepe Pogo Pretzel Puddle Rascal
    Ripple Rolo Scamper Skipper Snickers Snowball Sprinkles Squeaky Taffy Tango Toast Truffle Tulip Whiskers
    Wobble Yoyo Zuzu
    """.split()
)
GIRL_NAMES = tuple(dict.fromkeys(GIRL_NAMES))
BOY_NAMES = tuple(dict.fromkeys(BOY_NAMES))
PET_NAMES = tuple(dict.fromkeys(PET_NAMES))
NAMES = tuple(dict.fromkeys(GIRL_NAMES + BOY_NAMES + PET_NAMES))

_FUNCTION_WORDS = """
    a an the to and or but so if then than that this these those there here what who whom whose which when
    where why how all any both each every some many much more most few lot lots no not nor only own same
    such too very just also even still again once twice ever never always often sometimes soon now today
    tonight tomorrow yesterday later before after while until as at by for from in into of off on onto out
    over under up down with without about above across against along around behind below beside between
    beyond near inside outside through toward towards upon within past away back far close together alone
    i me my mine myself you your yours yourself he him his himself she her hers herself it its itself we
    us our ours ourselves they them their theirs themselves one ones someone something somewhere anyone
    anything everyone everything everywhere nobody nothing nowhere else yes no oh wow hi hello bye goodbye
    please thank thanks okay ok hooray yay hmm shh ah uh ouch yum boo
    am is are was were be been being do does did done doing have has had having can could will would
    shall should may might must let lets
    don't didn't doesn't can't couldn't won't wouldn't isn't wasn't aren't weren't haven't hasn't hadn't
    i'm you're he's she's it's we're they're i'll you'll he'll she'll we'll they'll i've you've we've
    they've i'd you'd he'd she'd we'd they'd let's that's there's what's who's where's here's
    zero one two three four five six seven eight nine ten eleven twelve twenty hundred first second third
    fourth fifth last next
    day days night nights morning mornings afternoon evening week weeks year years time times minute
    minutes hour hours moment while spring summer fall winter
    well sure maybe really almost quite enough half whole kind kinds sort bit little lot end middle side
    top bottom front edge corner way ways thing things place places part parts piece pieces
    yes mr mrs miss
    slowly quickly happily sadly softly quietly loudly gently carefully bravely kindly proudly
    suddenly finally slowly brightly warmly sweetly safely easily nicely calmly
    hard fast high low right left straight first best better worse worst
    """

_EXTRA_WORDS = """
    added ages bakeries banners bean bedtime beehives believe belly bent bicycles board bold bookshelf
    breakfast brighter buddies buddy canoes cans carts cattails chalk chapel chatty chuckled cocoa coconuts
    colorful comfy content cooler crawled cricket curly curtains darted dashed decided deserved doormat
    drawer drawings driftwood dusty eager eagles echoes everybody explorer fishing flamingos flour
    footprints forts gazed giddy glanced globes gloomy golden grasshoppers guilty haystack haystacks heather
    hippos homesick icicles joy jumpy kangaroos kid knights landed lane laundry leaped lit merry-go-round
    mill mission mittens moat moments neat noodles noticed nudged oat orchards ovens paintings pals parrots
    pawed pays peaceful peanut peas perked pigeons pines pins poles popped poppies posts pounced pretzel
    raced raincoat raisins relaxed ripples rods rug runner sacks sale scarecrow scary searched seemed shade
    shorter shown since sleds slice slippery sneezed snored sofa songbirds sore sparkly spotted stalls
    stared storybooks striped strolled swayed tadpoles tale tales tears tide toes tongue tortoises tractors
    truth tucked unhappy unsure vane wandered wardrobe weather wheelbarrow wheelbarrows whooped winding
    windmill woodpile zoomed
    locket pinwheel mitten coin stamp ticket teacup lollipop comb puzzle magnet badge medal necklace bracelet
    wand flute trumpet rattle napkin sponge slipper shovel vase puppet jewel gem crystal chestnut walnut
    number numbers course tight loose brick bricks post sounded moth lizard spider caterpillar chick duckling
    bunny bunnies cub cubs kitty puppies beetle ladybug squirrel chipmunk hedgehog raccoon badger beaver
    lamb donkey goose geese swan parrot robin crow sparrow firefly dolphin seal octopus
    acorn acorns pinecone pinecones pebble pebbles puddles twig twigs moss mushroom mushrooms log logs
    stump pine oak willow cherry blossom blossoms petal petals clover dandelion dandelions sunflower
    sunflowers tulip tulips vine vines hay barn barns shed ladder stairs step steps hallway kitchen
    bedroom attic porch mailbox chimney pot pots stove oven sink tub
    cloudy foggy rainy snowy stormy breezy chilly frosty misty
    breeze thunder lightning puddle fog mist frost sunshine sunlight sunset sunrise raindrop raindrops
    snowflake snowflakes dew
    treasure secret surprise promise idea plan wish adventure journey trip race prize picnic party
    riddle clue clues sign signs note notes word words magic trick tricks
    bakery library market village valley island shore beach cliff bay harbor dock stream creek waterfall
    sandcastle seashell seashells seaweed
    lantern flashlight blanket backpack compass whistle ribbon marble marbles yarn sticker stickers
    crumbs muffin muffins pancake pancakes jam soup stew apple apples berries grapes cherries plum plums
    nuts seeds
    hello sorry sorry goodnight
    mommy daddy mama papa granny uncle aunt cousin neighbor
    brave braver bravest kinder kindest bigger biggest smaller smallest taller tallest faster fastest
    happier happiest louder quieter softer warmer colder older oldest younger stronger strongest
    wiser wisest funnier
    hopped hopping hops clapped clapping
    grumpy sleepy bumpy muddy rocky sandy grassy snowy leafy shady
    squeak squeaked squeaking chirp chirped chirping buzz buzzed buzzing bark barked barking barks
    meow meowed purr purred purring quack quacked hoot hooted splashing
    giggle giggled giggling grin grinned grinning sniff sniffed sniffing wag wagged wagging wiggle
    wiggled peek peeked peeking tiptoe tiptoed tiptoeing shiver shivered shivering sigh sighed
    gasp gasped cheer cheered cheering glow glowed glowing sparkle sparkled sparkling twinkle twinkled
    twinkling rustle rustled rustling tremble trembled blink blinked
    curled curl hooray snack snacks nap naps
    surprised excited worried frightened amazed thankful hopeful cheerful grateful upset nervous puzzled
    glad joyful lost stuck broken muddy tangled tired sleepy
    afraid ahead air animal animals another anymore asleep bat bats birthday breath bun bunch camp care cart
    cheeks church clear closely coconut crackers crickets crisp crows different dirt dragonfly dragonflies
    dust ear ears earth echo family favorite feeling feelings fern ferns fisherman flat fountain fresh fun
    giant ground hall halls hey hollow hose joke kids kindness ladders lady ladybugs late lazily leader lip
    lovely man mint music noise other pads page pages pale palm people pile piles playful prettier problem
    problems promises reeds ripe rooster salt sandcastles seagull seagulls seek self serious shelf shelves
    sick sound sounds spot spots squirrels starfish steady strange street streets super swans tag teapot
    teeth thick thought thoughts thump tiptoes tomato tomatoes trail tummy tunnel voice voices wooden
    woodpecker world yet chapter lily lilies sudden orchard treat treats moral warning narrow snowman
    ago angel angels anywhere baker bar bars bead beads because block blocks bun buns butter chimneys clearly
    corner corners dock docks fountains fruit fur giraffe giraffes icy loaves longer mind mistake mossy pal
    patch patches patient perfect playground pleased pool pools popcorn ribbons root roots rough row rows
    sandbox sandboxes seesaw seesaws seller sellers sharp sight sled sledding smoke snowball snowballs
    snowmen spray stream streams stump stumps sugar team thorny track tracks tunnel tunnels worth zebra
    zebras color colors dizzy finger fingers line lines sunday sundays treasures tune tunes spun ha question questions
    sleeve sleeves wherever others backs ice tooth teeth crunching shallow wrong brightest double flake flakes free hoo forever moonlight needle needles
    beans beetles beneath breathed chipmunks clip closer cork crumb damp ditch ducklings either figs gap
    handful headed hopscotch hunted jolly laid lands leap lips longest merry mole oranges paw plank planks
    plenty plump robins rosy sides sipped sparrows squeeze string surprises thorn thorns thread tidy
    tortoise tuft twirled usual wobbly woman
    chains contest crooked crunch fort holiday hunting lumpy passed prickly prints racing riddles shaggy snug
    spent squishy wiggling
    bunches buried buttercups chicks fight lively seals swung tops tractor trays tufts waterfalls
    acted already cuddly farther luck ooh partner shrug trust whee yippee
    """

# Word forms of the story engine's typed pools (animals, objects, foods, sounds, textures, actions...).
_POOL_WORDS = """
    adventures agree among anchors apart armor atlas atlases awnings backpacks bales bang barrels beaches
    beanbags beat beavers biscuits blade blueberries bluebirds bobbing bookmarks born boulders bump bumping
    buoys camels campsite carousel carpets case cases caterpillars cereal chattering chatting check cheeky
    chests chewing chiming chipped chips chocolate chubby chunky churches cider clang click clinking
    clothespin clovers clown clowns coffee collar collection cone cones coo cottages cotton counter
    crackling crate crates crawling cream crocodiles crumbly cute dancer dearest delightful dice ding
    dinosaur discovered dots dozed dozen drifted driver drizzle duster eagle enjoy exactly except expected
    eyeing faded fair fancy feared feelers fireflies firewood fishermen flashlights foghorn footsteps
    forgetting frame freeze fried frozen furry gathered gazing gleaming glittery glossy gourds grasshopper
    gravel greeted guide gull gulls gust hairpin hairy hammock handed hanging heap heels hook hooting horn
    hung hushed hut ideas insects invented islands jig jigsaw jokes jugglers juicy jungle kangaroo keeper
    knobby koala koalas lacy ladies lanterns least lemonade lesson lid life lighthouse limes lined lobster
    magical mailboxes marshmallows masts maze melon melons men milky mists moats models moths mound mouth
    museum nail napped neighing nicer nosed oatmeal oil ostriches pails paintbrush painters pair pecking
    peekaboo peep peered perched pictured pigeon pillars pin placed planets plopped pointy polish polished
    pop posters poured pranced prettiest pretzels puffins pup puzzles quaint raised raspberries rats reason
    return returned rhinos rice rink rise rocking roundest rounds rubber rugs ruler sailboats sails sank sap
    scampered scare scarves seconds seem settled shallows sheds sheets shields shimmering shinier shoelace
    shoelaces shut sifting silently skated skaters skates skating slapping slimy sloth sloths smelly snap
    snapping snoozed someday speckled spices spiders spiky spinning splendid spongy spool spotty sprinkler
    square stack stacked stacks stalks station statues steam stem stir stony straw strawberries straws
    stuffed sturdy suitcases suits sunning suppose swinging swishing swords tadpole tar tarts teaspoon
    teaspoons thoughtful thyme timer timetables tin tinkle tire toad toasted tongues torn towels tricky
    tripped trotted trouble tumbled twirl twisty velvety waddle wavy wax web webs wee weed weeds whoosh
    wiggly windmills windowsill wiping woodpeckers woolly wound wriggled yo-yos yogurt yummy zipper
    """

_IRREGULAR_PAST = {
    "be": "was were been",
    "bring": "brought",
    "build": "built",
    "catch": "caught",
    "come": "came",
    "cut": "cut",
    "dig": "dug",
    "do": "did done",
    "draw": "drew drawn",
    "drink": "drank",
    "eat": "ate eaten",
    "fall": "fell fallen",
    "feed": "fed",
    "feel": "felt",
    "find": "found",
    "fly": "flew flown",
    "get": "got",
    "give": "gave given",
    "go": "went gone",
    "grow": "grew grown",
    "have": "had",
    "hide": "hid hidden",
    "hold": "held",
    "keep": "kept",
    "know": "knew known",
    "leave": "left",
    "lose": "lost",
    "make": "made",
    "mean": "meant",
    "meet": "met",
    "put": "put",
    "read": "read",
    "ride": "rode ridden",
    "run": "ran",
    "say": "said",
    "see": "saw seen",
    "sell": "sold",
    "shine": "shone",
    "sing": "sang sung",
    "sit": "sat",
    "sleep": "slept",
    "slide": "slid",
    "stand": "stood",
    "swim": "swam swum",
    "take": "took taken",
    "tell": "told",
    "think": "thought",
    "throw": "threw thrown",
    "wake": "woke woken",
    "begin": "began begun",
    "become": "became",
    "blow": "blew blown",
    "break": "broke broken",
    "buy": "bought",
    "forget": "forgot forgotten",
    "hear": "heard",
    "lead": "led",
    "lie": "lay",
    "shake": "shook shaken",
    "set": "set",
    "split": "split",
    "ring": "rang rung",
    "hurt": "hurt",
    "teach": "taught",
    "understand": "understood",
    "bet": "bet",
    "wear": "wore worn",
    "win": "won",
    "write": "wrote written",
}
_DOUBLE_FINAL = {
    "step",
    "tap",
    "clap",
    "drop",
    "grab",
    "hop",
    "hug",
    "nod",
    "skip",
    "stop",
    "dig",
    "run",
    "swim",
    "sit",
    "win",
    "cut",
    "put",
    "get",
    "wag",
    "plan",
    "pat",
    "rub",
    "trip",
    "jog",
    "shop",
    "hum",
    "slip",
    "yap",
    "pet",
    "lap",
    "drip",
    "flap",
}
_IRREGULAR_PLURAL = {
    "child": "children",
    "foot": "feet",
    "mouse": "mice",
    "sheep": "sheep",
    "fish": "fish",
    "deer": "deer",
    "goose": "geese",
    "wolf": "wolves",
    "leaf": "leaves",
    "shelf": "shelves",
    "knife": "knives",
    "tooth": "teeth",
    "person": "people",
    "man": "men",
    "woman": "women",
}


def plural(noun: str) -> str:
    """The plural of a basic noun."""
    if noun in _IRREGULAR_PLURAL:
        return _IRREGULAR_PLURAL[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def verb_forms(verb: str) -> tuple[str, ...]:
    """Base, third person, past (and participle) and -ing forms of a basic verb."""
    double = verb in _DOUBLE_FINAL
    if verb == "lie":
        ing = "lying"
    elif verb.endswith("e") and verb not in ("be", "see"):
        ing = verb[:-1] + "ing"
    else:
        ing = verb + (verb[-1] if double else "") + "ing"
    if verb.endswith(("s", "x", "ch", "sh", "o")):
        third = verb + "es"
    elif verb.endswith("y") and verb[-2] not in "aeiou":
        third = verb[:-1] + "ies"
    else:
        third = verb + "s"
    if verb in _IRREGULAR_PAST:
        past: tuple[str, ...] = tuple(_IRREGULAR_PAST[verb].split())
    elif verb.endswith("e"):
        past = (verb + "d",)
    elif verb.endswith("y") and verb[-2] not in "aeiou":
        past = (verb[:-1] + "ied",)
    else:
        past = (verb + (verb[-1] if double else "") + "ed",)
    return (verb, third, ing, *past)


def _all_forms() -> frozenset[str]:
    words = set(_FUNCTION_WORDS.split()) | set(_EXTRA_WORDS.split()) | set(_POOL_WORDS.split())
    words |= set(COLOURS) | set(ADJECTIVES)
    words |= {form for verb in VERBS for form in verb_forms(verb)}
    words |= set(NOUNS) | {plural(noun) for noun in NOUNS}
    return frozenset(word.lower() for word in words)


BASIC_WORDS: frozenset[str] = _all_forms()
