"""The sentence grammar of the story engine (see ``grammar.parse_sections`` for the notation).

Role slots: ``A`` is the one who acts in a sentence and ``B`` the one beside them (``A_he A_He A_his A_His
A_him A_kind`` and the same for ``B``); ``H``/``F`` are always the hero and the friend. Story slots: ``P`` a
reference to the pet and ``Pn`` its name, ``PK`` its kind; ``here``/``next`` places and ``pthing psound
psmell pplay`` what is found there; ``quest`` the thing looked for, ``home`` the hero's home; ``QC HC FC``
colours, ``HID`` a hiding place, ``PROM`` a promise, ``WORD`` a secret word, ``NUM`` a count, ``G`` the
helper, ``C`` a companion met on the way. Upper-case fact slots hold placeholders resolved to values.
"""

from __future__ import annotations

from ltsgen.stories.grammar import parse_sections

GRAMMAR_TEXT = r"""
# ---------------------------------------------------------------- small parts
@then
~
~
~
Then,
After that,
Soon,
Next,
A little later,
After a while,
Before long,
Later,
Right then,
Now
So
And then
A moment later,
When {A_he} was ready,
Without a word,
Step by step,
In a little while,

@sudden
Suddenly,
All of a sudden,
Just then,
Right at that moment,
Out of nowhere,
Then, without warning,

@adv
slowly
quickly
happily
carefully
quietly
bravely
softly
gently
proudly
with a big smile
as fast as {A_he} could
on {A_his} tiptoes
with a little skip
side by side with {B}

@try_fail
fell down
was too small
could not reach
got very tired
slipped back
had to stop

@pet_find_noun
stick
stone
leaf
feather
bone
ball

@light_adj
soft
gold
warm
bright
pale

@touch
soft
cool
smooth
rough
warm
wet

@animal_cap
A duck
A frog
A squirrel
A rabbit
A little bird
A turtle
A little mouse
A snail
A fat bee
A butterfly
An old owl
A lamb

@fav_did
held it up high
looked at it for a while
showed it to {B}
gave it a little hug
brushed off the {dirt_kind}

@fav_state
was a bit dirty now
was still safe
looked very bright at {here}
made {A} think of {home}
was the best thing {A} had

@dirt_kind
mud
dust
sand
grass
rain

@spot_state
full of {dirt_kind}
wet from the rain
shining in the sun
hard to see
a little dirty

@very
very
so
really
a little
super
quite

@feel_good
happy
glad
proud
excited
calm
safe
warm
brave
cheerful
hopeful
thankful
joyful

@feel_bad
sad
scared
worried
upset
tired
lonely
cold
nervous
grumpy
puzzled
frightened

@feel_body
{A_his} heart went thump, thump
{A_his} knees shook a little
{A_his} eyes grew big and round
{A_his} tummy felt funny
{A_his} hands felt cold
{A_his} cheeks went pink

@smile
smiled
grinned
giggled
laughed
nodded
clapped {A_his} hands
jumped up and down
gave a happy sigh
did a little dance
hugged {B}
beamed

@sad_act
sighed
frowned
looked at the ground
rubbed {A_his} eyes
sat down on a rock
kicked a small stone
held {A_his} breath
bit {A_his} lip

@said
said
called
whispered
shouted
told {B}
said with a smile
said in a small voice
said softly
cried

@said_inv
said
called
whispered
shouted
cried

@replied_inv
said
replied
answered
laughed
called back

@look
smile
nod
grin
wink
serious face

@replied
said
replied
answered
said back
called back
laughed

@time
In the morning,
In the afternoon,
That evening,
The next day,
The next morning,
Later that day,
Early one morning,
One sunny day,
One cold morning,
After lunch,
Before dinner,
On the way,

@colour
red
blue
green
yellow
pink
purple
orange
white
brown

@size
big
small
little
tiny
tall
long
round
huge

@nice
pretty
shiny
soft
bright
warm
lovely
funny
fuzzy
smooth
special
sweet

@animal
a duck
a frog
a squirrel
a rabbit
a bird
a turtle
a little mouse
a snail
a bee
a butterfly
a ladybug
an old owl
a goat
a lamb
a fox
a deer
a hedgehog
a robin

@animals
ducks
frogs
squirrels
rabbits
birds
bees
butterflies
ladybugs
mice
snails
ants
fish
crows

@sky
The {wind_adj} wind made the {pthing} move.
The light was {light_adj} over {here}.
A bird flew high over {here}.
The shadows of the {pthing} grew long.
The sky was {colour_sky} and {sky_adj}.
The sun was {sun_state}.
A {wind_adj} wind blew {wind_where}.
{cloud_s}
The air was {air_adj} and the sun was {sun_state}.
It was a {day_adj} day.
Little clouds moved {cloud_move} across the sky.
The sun {sun_move}.
A {wind_adj} breeze played with {A_his} hair.
The day felt {day_feel}.

@colour_sky
blue
gray
pink
orange
bright blue
soft blue
pale

@sky_adj
clear
calm
full of little clouds
very big
still
quiet

@sun_state
warm
high in the sky
hiding behind a cloud
shining on the grass
low and orange
bright and kind
soft and gold

@sun_move
peeked out from behind a cloud
went down behind the hill
came up over the trees
warmed the ground
made everything shine
shone on the water

@wind_adj
soft
cool
little
cold
warm
gentle
strong

@wind_where
through the trees
over the grass
across the field
past the houses
around them
along the path

@cloud_s
Big white clouds looked like {cloud_shape}.
One cloud looked just like {cloud_shape}.
{A} saw a cloud shaped like {cloud_shape}.
The clouds were fluffy, like {cloud_shape}.

@cloud_shape
a sheep
a big boat
a sleepy cat
a castle
a bunny
a dragon
a birthday cake
a giant shoe
an elephant
a fish

@air_adj
cool
fresh
warm
sweet
still
crisp

@day_adj
sunny
windy
cloudy
warm
quiet
bright
lovely
chilly
busy

@day_feel
long and slow
full of hope
like a new start
a little strange
calm and kind
bright and new

@cloud_move
slowly
lazily
quickly
softly

# ---------------------------------------------------------------- pet
@pet_act
{P} got some of the {snack} too.
{P} {pet_move}, then {pet_move}.
{P} ran back to {A} with {pet_find}.
{P} splashed in a little puddle.
{P} pushed {P_his} nose into {A_his} hand.
{P} was the first to reach the {pthing}.
{P} got a leaf stuck on {P_his} head, and {A} took it off.
{P} followed a {small_animal} until it went away.
{P} sat very still and looked at the {pthing}.
{P} wanted to play, so {A} threw a stick.
{P} ate a bit of {snack} from {A_his} hand.
{P} found a {pet_find_noun} near the {pthing}.
{P} {pet_move}, and {B} laughed.
{P} {pet_sound} when {P_he} saw the {pthing}.
{P} did not like the {pthing} and hid behind {A}.
{P} went to sniff the {pthing}.
{P} {pet_move}.
{P} {pet_move} and {pet_move}.
{P} {pet_sound} at {pet_target}.
{P} ran {pet_where}.
{P} sniffed {pet_sniff}.
{then} {P} {pet_move}.
{P} was {pet_state}.
{P} sat by {A_his} feet and {pet_move}.
{P} stayed close to {A}.
{P} looked up at {A} and {pet_move}.
{A} patted {P} on the head.
{A} gave {P} a {pet_treat}.
"Good {PK}," said {A}, and {P} {pet_move}.
{P} found {pet_find} and brought it to {A}.
{P} chased {pet_chase} {pet_where}.
{P} {pet_sound} {pet_sound_how}.
{A} scratched {P} behind the ears.
{P} rolled in the {roll_in} and got {roll_state}.

@pet_move
wagged {P_his} tail
jumped up
ran in a circle
rolled over
sat down
licked {A_his} hand
looked around
tilted {P_his} head
wiggled {P_his} nose
hopped on the spot
lay down in the sun
shook {P_his} ears
yawned a big yawn
jumped into {A_his} arms
ran ahead
stretched {P_his} legs

@pet_where
down the path
around the tree
through the grass
to the water
up the hill
after a leaf
in and out of the bushes
across the field
behind a big rock

@pet_target
a bird
a bee
a leaf
a butterfly
the wind
a little frog
a squirrel
{A_his} own shadow
a big bug

@pet_sniff
the grass
the ground
the air
a flower
an old log
the path
a small hole
a rock

@pet_treat
treat
hug
little snack
piece of bread
pat
bit of cheese

@pet_find
a stick
a pinecone
a red leaf
an old shoe
a round stone
a feather
a ball

@pet_chase
a butterfly
a leaf
a squirrel
a bee
the ball
a rolling apple

@pet_state
happy
sleepy
hungry
very good
full of fun
a little tired
excited
curious

@pet_sound_how
loudly
two times
happily
at the sky
softly
once

@roll_in
grass
mud
leaves
sand
flowers

@roll_state
muddy
green
very messy
all dirty
covered in leaves

# ---------------------------------------------------------------- places and travel
@travel
{then} {A} and {B} walked to {next}.
{then} {A} and {B} set off for {next}.
{then} they went to {next}, {adv}.
{A} took {B} by the hand, and they went to {next}.
{then} the friends followed the {path_kind} to {next}.
{A} said, "Let's go to {next}!" and off they went.
"{travel_line}" said {A}. So they went to {next}.
The {path_kind} led them to {next}.
{then} {A} {walk_verb} along the {path_kind} to {next}.
They {walk_verb} past {path_sight} on the way to {next}.
It was a long walk to {next}, but they did not stop.
{A}, {B} and {P} made their way to {next}.
{then} they {walk_verb} over {path_over} and came to {next}.

@travel_line
Come on, {B}!
This way, {B}!
I know where to look next.
Follow me!
Let's try over there.
We can do this!
Maybe it is over there.
Let's keep going!

@walk_verb
walked
skipped
ran
hurried
marched
hopped
walked slowly
went

@path_kind
path
little road
dirt path
long road
trail
stone path
grassy path

@path_sight
a tall tree
an old fence
a red barn
a little pond
a field of flowers
a big rock
a sleepy cow
a broken cart
a little bridge
some happy ducks

@path_over
a little hill
a small bridge
some stones
a fallen tree
a field
a wooden fence

@arrive
At last they came to {here}.
When they got to {here}, {A} looked around.
{here_cap} was {place_adj}.
{A} had never been to {here} before.
They stopped at {here} to look around.
"Here we are!" said {A} when they reached {here}.
{here_cap} looked {place_adj} in the {light}.
It did not take long to get to {here}.

@light
sun
morning light
soft light
warm light
evening light

@place_adj
big and quiet
full of {pthing}
very pretty
a little dark
calm and still
bright and busy
bigger than {A} thought
green and fresh
full of sounds
old and quiet

@describe
There were more {pthing} at {here} than {A} could count.
The {pthing} looked {nice} in the {light}.
{A} liked the {pthing} best of all.
Over by the {pthing}, something was moving.
A path went between the {pthing}.
"What a {nice} place," said {B}, looking at the {pthing}.
{A} stood still and listened to {psound}.
Everywhere {A} looked, there were {pthing}.
The {pthing} were {nice} and {nice}.
Some of the {pthing} were {colour}, and some were {colour}.
{A} touched the {pthing}. They felt {touch}.
The {pthing} moved a little in the {wind_adj} wind.
Close to the {pthing}, {A} saw {animal}.
{animal_cap} was sitting near the {pthing}.
{here_cap} was full of {pthing}.
There were {pthing} everywhere.
{A} saw {pthing} and {pthing}.
{A} could hear {psound}.
It smelled like {psmell}.
Near {A} there were {pthing}.
The air smelled of {psmell}.
{pthing_cap} were all around them.
{A} looked at the {pthing} for a long time.
"Look at the {pthing}!" said {A}.
All {A} could hear was {psound}.
Far away, {A} could see {pthing}.
{B} pointed at the {pthing}.
{A} had never seen so many {pthing}.
{A} loved the {pthing} and the {psmell_short}.
Little {animals} lived near the {pthing}.

@play
{A} and {B} {pplay}, and {P} joined them.
"Let's play a game," said {B}. They played {game}.
{A} won the first game, and {B} won the second.
They played {game} with {P}, and {P} won!
{A} taught {B} a new game with {small_objs}.
They laughed so hard that {A_his} tummy hurt.
{A} and {B} {pplay} until they were tired.
{A} {pplay}, and {P} {pet_move}.
{B} laughed when {A} {pplay}.
They took turns and {pplay}.
{A} had so much fun! {A_He} {pplay} two times.
{A} and {B} {pplay}.
{then} the friends {pplay}.
For a while, they {pplay}.
{A} {pplay}, and {B} watched.
{B} showed {A} how to play a game with {small_objs}.
They played a game of {game} near {here}.
{A} and {B} sang a song about {song_about}.
{A} counted the {pthing}, one by one.
They made up a story about {song_about}.
{A} and {B} sat down to rest and {rest_act}.

@game
tag
hide and seek
catch
follow the leader
jump the stones
guess the sound
who can hop the most

@song_about
the sun
a happy frog
a big red bus
a sleepy moon
a brave little fish
the rain
a dancing bear
a kind tree

@rest_act
ate some {snack}
drank some water
looked up at the sky
shared {snack}
talked about {talk_about}
listened to {psound}

@snack
apples
bread and jam
cookies
a sandwich
berries
crackers
cheese
two muffins
some nuts

@talk_about
their favorite games
what they wanted to be
the stars
their moms and dads
the best kind of cake
funny dreams

# ---------------------------------------------------------------- feelings and thoughts
@find
{A} found {found_thing} {found_where}.
Near the {pthing}, {A} saw {found_thing}.
{B} picked up {found_thing} and showed it to {A}.
"What is this?" asked {A}, holding up {found_thing}.
{P} found {found_thing} {found_where} and {pet_move}.
{found_thing_cap} was lying {found_where}.
{A} put {found_thing} in {A_his} pocket for later.
"Look what I found!" said {B}. It was {found_thing}.
{A} almost stepped on {found_thing} {found_where}.

@found_thing
a {colour} {small_obj}
a {size} {small_obj}
an old {small_obj}
a {nice} {small_obj}
a tiny {colour} {small_obj}
two {colour} {small_objs}
some {nice} {small_objs}

@found_thing_cap
A {colour} {small_obj}
A {size} {small_obj}
An old {small_obj}
A {nice} {small_obj}

@small_obj
button
feather
stone
shell
leaf
acorn
pinecone
ribbon
spoon
cup
sock
glove
marble
bell
flower
seed
nut
stick
toy car
crayon
pencil
note
ball
bottle
bead
cap
hat

@small_objs
buttons
feathers
stones
shells
leaves
acorns
pinecones
ribbons
marbles
bells
flowers
seeds
nuts
sticks
crayons
beads

@found_where
under a leaf
by the path
in the grass
near a tree
on a rock
behind a bush
in the sand
next to the water
in a little hole
under a bench
on the ground
between two stones
in the mud

@animal_meet
{animal_cap} {animal_did} {animal_where}.
{A} saw {animal} {animal_did} {animal_where}.
"Hello, little {small_animal}," said {A}. The {small_animal} {small_animal_did}.
{animal_cap} came close and looked at {P}.
{P} and {animal} looked at each other for a long time.
{B} pointed at {animal} that {animal_did} {animal_where}.

@animal_did
jumped
ran
hopped
sat
sang
looked at them
went to sleep
ate a seed
played
hid

@animal_where
near the {pthing}
on a rock
under a bush
by the path
in the grass
on a branch
next to {P}
in the sun

@fruit
apples
berries
plums
cherries
pears

@animal_word
bear
fox
mouse
duck
rabbit
frog
lion
owl

@rest
They sat down under a tree and ate {snack}.
{A} and {B} stopped to rest by the {pthing}.
{A} gave {B} some of {A_his} {snack}.
They drank some cool water and felt {feel_good} again.
{A} lay on the grass and looked at the {sky_thing}.
"Let's stop for a bit," said {B}, and they sat on a {seat}.
After a short rest, they felt {very} strong again.
They shared {snack} with {P} and talked about {talk_about}.
{A} took off {A_his} shoes and rested {A_his} feet.

@sky_thing
clouds
sky
birds in the sky
tall trees
little clouds

@seat
big rock
log
bench
soft patch of grass
flat stone

@feel
{A} felt {very} {feel_good} when {A_he} saw the {pthing}.
{A} was a little {feel_bad}, but {P} made {A_him} laugh.
{A} did not know why, but {A_he} felt {feel_good}.
{A} thought of {home_person} and felt {feel_good}.
{A} felt the {wind_adj} wind on {A_his} face and {smile}.
{A} was so {feel_good} that {A_he} sang a little.
For a while, {A} felt {feel_bad}, so {B} held {A_his} hand.
{A} felt {feel_good}, because {B} was there.
{A} was {feel_bad} for a moment, but then {A_he} {smile}.
{A_His} heart was full, and {A_he} {smile}.
{B} {smile_b}, and {A} felt {feel_good} too.
It was hard, but {A} felt {feel_good} inside.
A warm, {warm_feel} feeling filled {A_his} heart.
{A} looked at the {pthing} and felt {feel_good}.
{A} felt {very} {feel_good}.
{A} felt {very} {feel_bad}.
{A} was {very} {feel_good}.
{A} was {very} {feel_bad}, and {feel_body}.
{A_He} felt {feel_good} and {feel_good}.
{A} {smile}.
{A} {sad_act}.
{A} took a deep breath.
{B} could see that {A} was {feel_bad}.
{A} looked at {B} and {smile}.
{A} felt a little better now.
{A} did not feel {feel_bad} anymore.
Deep inside, {A} felt {feel_good}.

@think
{A} hoped {quest} was safe, wherever it was.
"We are coming," {A} said softly, thinking of {quest}.
{A} looked around for anything {QC}.
{A} did not forget why they were here: {quest}.
Every {QC} thing {A} saw made {A_him} think of the {qobj}.
{A} held {P} close and thought about {quest}.
"Do you think we will find {quest}?" {A} asked {Pn}.
{A} was sure {quest} was out there somewhere.
In {A_his} mind, {A} could see {quest} very clearly.
{A} wanted to find {quest} before the sun went down.
{A} thought about {quest}.
{A} still wanted to find {quest}.
{A} thought, "{think_line}"
{A} wondered where {quest} could be.
{A} did not give up on {quest}.
"We will find {quest}," said {A}.
{A} closed {A_his} eyes and thought of {quest}.
{A} remembered {quest} and felt {feel_good} again.
"{think_line}" said {A} to {Pn}.
{A} thought of {home} and of {H_his} {FC} {fobj}.

@think_line
I will not give up.
We are getting close.
Maybe it is near here.
I hope we find it soon.
I can be brave.
One more step.
I wonder what is next.
This is a real adventure.

# ---------------------------------------------------------------- dialogue
@talk
"{q}" {A} asked. {B} thought for a moment. "{answer}"
"{exclaim}" said {A}. "{line}"
{A} pulled on {B}'s sleeve. "{line}"
{B} put a hand on {A}'s arm. "{answer}"
"{line}" said {A} to {B} in a {voice} voice.
"{q}" {B} asked. "{answer}" {A} said with a {look}.
{A} had a question. "{q}"
"{line}" said {A}. {B} {smile_b} and said, "{answer}"
"Hey, {B}," said {A}. "{line}"
{A} whispered to {B}, "{whisper_line}"
"{greet}, {B}!" said {A}.
"{q}" {A} asked {B}.
{A} {said}, "{line}"
"{line}" {said_inv} {A}.
"{line}" said {A}. "{line2}"
{B} {replied}, "{answer}"
"{answer}" {replied_inv} {B}.
"{q}" asked {A}. "{answer}" said {B}.
{A} turned to {B}. "{line}"
"{line}" {A} told {B} with a {look}.
"{exclaim} {line}" said {A}.
{B} looked at {A} and said, "{answer}"

@warm_feel
happy
glad
proud
calm
cozy
soft

@smile_adj
big
warm
kind
little
happy
shy
wide

@voice
quiet
happy
small
big
soft
brave
sleepy
silly

@whisper_line
Do you hear that?
I think something is watching us.
Let's be very quiet.
Look over there, by the {pthing}.
I have a secret plan.
Don't wake up the {small_animal}.

@greet
Hello
Hi
Good morning
Hey
Look

@exclaim
Wow!
Oh!
Look!
Yay!
Oh my!
Hooray!
Hmm.

@q
How far is {next}?
Do you think {home_person} misses us?
What do you think is behind the {pthing}?
Why is {Pn} so {pet_state}?
Should we stop and eat {snack}?
Have you ever seen so many {pthing}?
What was that sound?
Do you remember the way back?
What would you wish for, {B}?
Is it time for {snack} yet?
Do you see that, {B}?
What is that over there?
Can you help me?
Where do you think {quest} is?
Are you {feel_bad}, {B}?
Do you want to {do_together}?
Is it far?
What should we do now?
Can we rest for a bit?
Do you like the {pthing}?
Did you hear that?
Are you ready, {B}?
Which way should we go?
Will you stay with me?

@do_together
play a game
sing a song
look for {quest}
have a snack
go to {next}
count the {pthing}
race to the tree

@line
I can see {next} from here!
My feet are tired, but I am happy.
Let's make a wish on the {pthing}.
{Pn}, come back here!
I bet {home_person} is thinking of us.
Listen! I can hear {psound}.
I never want this day to end.
Race you to the {pthing}!
Can you smell {psmell}?
This is the best day ever!
The {pthing} here are so {nice}!
{Pn} is the best {PK} in the world.
Do not be {feel_bad}, {B}.
I am happy you are here, {B}.
When we find {quest}, {home_person} will be so happy.
We have to find {quest}.
I think we should {plan_act}.
Let's {plan_act}.
I am {very} {feel_good}!
I feel a little {feel_bad}.
Look at the {pthing}!
{Pn} is {pet_state}.
This place is {place_adj}.
We can do it together.
I love {here}!
Stay close to me, {B}.
I think I hear {psound}.
Thank you for coming with me, {B}.
I have an idea!
It is getting late.
I wish {home_person} could see this.
You are a good friend, {B}.
Be careful, {B}.
Let's not give up.

@line2
Come on!
Let's go!
It will be fun.
I know it.
We can do it.
Follow me.
Are you with me?
Hold my hand.

@answer
Not yet, but soon.
I think it is just {animal}.
Let's look behind the {pthing}.
I love {snack}!
Maybe, but we must be careful.
We can rest by the {pthing}.
I want to see {next} too!
Ha! You are so funny, {A}.
I am hungry too.
Only if {Pn} can come too!
I would wish for a hundred {snack_one}.
Yes, let's go!
Okay, I will help you.
I am not {feel_bad}.
Me too!
I think so.
Maybe we should {plan_act}.
That is a good idea!
I will stay with you.
We will find it, I know we will.
Don't worry, we can do it.
I see it too!
Let's ask someone.
I am a little {feel_bad}, but I am with you.
You are right.
No, I did not see it.

@snack_one
cookies
apples
cupcakes
muffins
pancakes

@plan_act
look under the {look_under}
ask for help
go a different way
rest for a minute
follow the path
look over there
be very quiet
walk a bit faster
try one more time
stay together

@look_under
leaves
big rock
bushes
old bench
tall grass
bridge

# ---------------------------------------------------------------- problems and help
@problem
{sudden} {trouble_lc}
{then} {trouble_lc}
{trouble}
But then {trouble_lc}

@trouble
A {big_thing} blocked the path, and they could not get past.
{A} got {A_his} foot stuck between two {stuck_in}.
The {pthing} were in the way, and there was no path.
{P} got scared of {scary} and ran off.
{A_His} bag got caught on a {caught_on}.
They could not find the path back to {here}.
A big wind blew, and {A_his} hat flew away.
Dark clouds came, and it began to rain.
The path ended at a wide river with no bridge.
{P} ran off after a {pet_target_noun} and did not come back.
They came to a tall wall that was too high to climb.
A big log was lying across the path.
The bridge was broken in the middle.
{A} slipped on a wet stone and hurt {A_his} knee.
It got dark, and they could not see the path.
A big dog stood in the way and barked at them.
{B} got stuck in some thick mud.
The path split in two, and they did not know which way to go.
A little bird had fallen out of its nest.
{A} dropped {A_his} bag, and the {snack_one} fell out.
The gate was closed, and it was very heavy.
A tree branch fell across the path with a loud crack.
The water was too deep to walk through.
{A_his} shoe came off and fell into a hole.
They heard a strange noise in the bushes.
A cold fog came, and they could not see far.

@trouble_lc
a {big_thing} blocked the path, and they could not get past.
{P} got scared of {scary} and ran off.
{A_his} bag got caught on a {caught_on}.
{A} got {A_his} foot stuck between two {stuck_in}.
a big wind blew, and {A_his} hat flew away.
dark clouds came, and it began to rain.
the path ended at a wide river with no bridge.
{B} got stuck in some thick mud.
it got dark, and they could not see the path.
a tree branch fell across the path with a loud crack.
a cold fog came, and they could not see far.

@big_thing
big rock
fallen tree
pile of sticks
tall fence
big muddy puddle
sleeping cow

@stuck_in
rocks
roots
logs
stones

@scary
a loud noise
a big shadow
the thunder
a buzzing bee
a splash in the water
a barking dog

@caught_on
branch
fence
thorny bush
sharp rock

@pet_target_noun
rabbit
butterfly
squirrel
bird
ball

@try
{A} tried to {try_act}, but {A_he} {try_fail}.
{B} tried to help, but it was still too hard.
{P} {pet_sound}, but that did not help.
{A} {sad_act}. "{try_line}"
{A} tried to {try_act}, but it did not work.
{A} tried again and again.
"{try_line}" said {A}.
{A} pushed and pulled with all {A_his} might.
{A} did not know what to do.
{A} looked at {B}, and {B} looked at {A}.
They tried to {try_act}, but it was too hard.
{A} sat down and {sad_act}.
"What do we do now?" asked {B}.
{A} felt {feel_bad}, but {A_he} did not cry.

@try_act
climb up
jump over
push it away
go around
call for help
find another way
be brave
pull {B} out

@try_line
This is too hard!
I can't do it!
Oh no, what now?
We need help.
I will try one more time.
Hmm, let me think.

@help
{B} {friend_help}, and {A} felt {feel_good}.
{P} {pet_help}, and {A} {smile}.
{A} thought hard, and then {A_he} had a {nice} idea: {idea}.
{then} {B} said, "{helper_line}" and showed {A} what to do.
{A} and {B} {team_act}, and it worked.
{A} {helper_find}, and that was just what they needed.
{A} had an idea. {A_He} used {H_his} {FC} {fobj} to help.
{P} {pet_help}.
{B} {friend_help}.
A kind {helper_kind} came by and helped them.
{A} and {B} worked together, and they did it.
They counted to three and pushed together.
{A} remembered what {home_person} always said: "{wise_saying}"

@help_g
{G} {helper_help}
{G} came by, just like {G_he} said {G_he} would. {G_He} helped them at once.
"Let me help," said {G} the {G_kind}, and {G_he} did.

@pet_help
barked and showed them a new path
found a way through the bushes
pulled the rope with {P_his} teeth
ran to get help
sniffed the ground and led the way
kept them warm

@friend_help
held {A_his} hand and said, "You can do it."
found a long stick to help
made a little bridge out of logs
had a good idea
knew a song that made them feel brave
shared {B_his} {snack} with {A}

@helper_help
came just in time. "{helper_line}" {G} said, and {G_he} showed them the way.
flew down from a tree. "Do not be afraid," {G} said, and helped them.
knew what to do. With {G_his} help, the problem was fixed.
smiled at them and said, "{helper_line}"

@helper_line
I can help you with that.
Follow me, little ones.
Never give up.
Good friends help each other.
Be brave, and be kind.
There is always a way.

@idea
they could use a long stick
they could go around by the {pthing}
they could wait for the sun
they could ask {P} to help
they could make a rope of {rope_of}
they could sing to feel brave

@rope_of
long grass
old vines
{A_his} scarf
some strong reeds

@team_act
pulled together
pushed at the same time
held hands and tried again
counted to three and jumped
went slowly, one step at a time
made a plan and tried it

@helper_find
found a long stick by the {pthing}
saw a small path behind the {pthing}
found some big flat stones
saw a little boat by the water
found an old rope near the {pthing}

@helper_kind
farmer
old man
lady
bear
owl
horse
goat

@wise_saying
Try, try again.
Slow and steady wins the race.
Be kind, and kindness will come back.
Two heads are better than one.
When you are scared, take a deep breath.
Look closely and you will see.

@fixed
{A} and {B} gave each other a big hug.
{B} {smile_b}. "We make a good team," {B_he} said.
{P} {pet_move}, as if to say, "Well done!"
The problem was gone, and the {pthing} were still there.
{A} felt {very} {feel_good}, and {A_he} {smile}.
{then} the problem was gone.
"We did it!" cheered {A} and {B}.
Everything was all right again.
{A} {smile}. "Thank you!"
{A} said thank you, and they went on.
The way was clear now.
"Hooray!" shouted {A}.
{A} felt {very} {feel_good}.
They were safe, and {A} was {feel_good}.
"Thank you, {B}," said {A}. "You are the best."
"That was close!" said {B}, and they both laughed.
After that, the path was easy.

# ---------------------------------------------------------------- wonder, memories, likeness, jokes
@wonder
{A} wondered if {wonder_q}.
"Do you think {wonder_q_direct}?" {A} asked.
{A} looked at the {pthing} and wondered why {wonder_why}.
{B} said that {wonder_fact}, and {A} wanted to know more.
Until now, {A} had never thought about {wonder_thought}.

@wonder_q
the {pthing} had names
{small_animal} ever got lost too
the moon could see them
the wind had a home
{P} could understand every word
the stars were very far away

@wonder_q_direct
the {pthing} can hear us
{small_animal} has a family
the sky ends somewhere
{Pn} dreams at night
the rain is ever tired

@wonder_why
some were big and some were small
they all looked the same
the {small_animal} liked it here
the sky was so big

@wonder_fact
bees make honey from flowers
frogs start out as tiny fish with tails
the moon has no light of its own
some birds fly very far in the winter
trees drink water with their roots
snails carry their homes on their backs

@wonder_thought
where the wind goes at night
how big the world is
what the {small_animal} thinks about
why the sky is {colour_sky}

@memory
{A} remembered the day {memory_day}.
This made {A} think of {memory_day_short}.
{A} told {B} about the time {memory_day}.
It was just like the time {memory_day}, {A} thought.

@memory_day
{home_person} took {H_him} to the {memory_place} for the first time
{Pn} was just a tiny {PK} and slept in a shoe
it snowed so much that the door would not open
{A_he} lost a tooth and put it under {A_his} pillow
{home_person} made a cake that was taller than {A_him}
{A_he} learned to ride a bike with {home_person}

@memory_day_short
the first time {A_he} saw the sea
{A_his} last birthday party
the big snow last winter
the day {Pn} came home
a song {home_person} used to sing

@memory_place
zoo
sea
farm
big town
lake

@likeness
The {pthing} were as {like_adj} as {like_thing}.
{A}'s hands were as cold as ice.
{P} was as happy as a bird in spring.
The path was as long as a {like_long}.
{B} was as quiet as a little mouse.
The {pthing} looked like {like_picture}.
{A} felt as light as a feather.
The water was as clear as glass.

@like_adj
big
soft
bright
tall
quiet
old
pretty

@like_thing
a house
a pillow
the sun
a tree
a sleeping cat
a king's crown
a picture in a book

@like_long
snake
river
long, long song
day without lunch

@like_picture
something from a dream
a painting in a book
a giant's toys
little hats
soft green pillows

@joke
{B} told a joke about a {joke_animal} who {joke_did}, and {A} laughed and laughed.
"Why did the {joke_animal} cross the road?" asked {B}. "To get to the other side!"
{A} made a funny face, and {B} laughed so much that {B_he} fell over.
{B} tried to walk like a {joke_animal}, and everyone giggled.
{P} did something so silly that {A} and {B} could not stop laughing.

@joke_animal
duck
cow
frog
pig
chicken
bear
goat

@joke_did
wore a hat to bed
tried to fly
could not stop singing
wanted to be a horse
ate a whole cake

# ---------------------------------------------------------------- good deeds, weather, night
@deed_need
{then} they heard a small cry near the {pthing}. It was {needy}.
{A} saw {needy}. It looked {feel_bad}.
Near the {pthing} sat {needy}, all alone.
"Help!" called a small voice. It was {needy}.

@needy
a baby duck who had lost its mom
a little bird with a hurt wing
a small snail stuck on its back
a tiny mouse who could not find its home
a little frog far from the water
a lamb caught in a bush
a bee who was too wet to fly
a young rabbit who was lost

@deed_do
{A} picked it up {adv} and helped it.
{A} and {B} looked for its home until they found it.
{A} made a soft bed of leaves for it and gave it some water.
{B} held it while {A} set it free.
{A} carried it all the way back to its family.
{A} shared {A_his} {snack} with it, and it felt better.
{P} stayed close and kept it warm.

@deed_thanks
{B} {smile_b}. "{deed_line}"
"{deed_line}" said {A}, and {P} {pet_move}.
{A} watched it go and felt {feel_good}.
The little one was safe now, and {A} was {very} {feel_good}.
The little one looked at {A} as if to say thank you.
Its mom came running, and they were together again.
It {deed_bye}, and {A} waved goodbye.
"You were very kind, {A}," said {B}.
{A} felt warm inside, because helping others felt good.
"We did a good thing today," said {A}.

@deed_line
You have a kind heart.
That was a good thing to do.
I hope it finds its family.
We helped a new friend today!
Now it is safe and warm.
I am glad we came this way.

@deed_bye
flew away into the sky
hopped away happily
ran off to its home
swam off with a happy splash
waved a tiny wing

@weather_turn
The sky grew dark, and big drops of rain began to fall.
The rain stopped, and a {rainbow_adj} rainbow came out over {here}.
The wind got stronger, and the {pthing} began to shake.
The sun came back out, and everything was wet and shiny.
Thunder rolled far away, so they waited under a big tree.
Snow began to fall in tiny white flakes.
A thick fog came down over {here}, soft and gray.
The clouds went away, and the sun was warm again.

@rainbow_adj
big
bright
long
pretty
double

@weather_react
{A} held out {A_his} hand to catch the drops.
{B} opened an old umbrella, and they stood under it.
{P} shook {P_his} wet fur and got everyone wet!
They jumped in the puddles, and the water went everywhere.
{A} had never seen a rainbow so close.
"Look at the sky!" said {A}.
They waited, and soon it was nice again.
{A} pulled {A_his} coat close and kept walking.

@night
The stars came out one by one over the {pthing}.
The moon was {moon_adj} over {here}.
{A} made a wish on the brightest star: {wish}.
Somewhere an owl said, "Hoo, hoo," and {P} {pet_move}.
{P} curled up by {A}'s feet to sleep.
They made a bed of {bed_of} near the {pthing} and lay down.
{B} told a quiet story about {song_about} until {A} fell asleep.
The night at {here} was {night_adj} and full of little sounds.
{A} looked at the stars and thought about {quest}.
In the dark, {A} was a little {feel_bad}, but {B} was there.
{A} counted the stars until {A_his} eyes closed.
A {wind_adj} wind moved the {pthing}, and {A} pulled the blanket up.
{A} dreamed of {dream}.
"Good night, {B}," whispered {A}. "Good night, {A}," said {B}.
Far away, a dog barked, and then it was quiet again.
The {pthing} looked {night_look} in the moonlight.

@moon_adj
big and round
thin like a smile
bright and white
low and orange
half hidden by a cloud

@wish
to find {quest} soon
to be home with {home_person}
to stay friends forever
to see {next} tomorrow

@bed_of
soft leaves
dry grass
warm blankets
pine needles

@night_adj
cool
still
dark and calm
quiet
warm

@dream
{home} and a warm bed
{quest}
flying over {here}
a giant cake
{P} as big as a horse
a boat on a sea of milk

@night_look
silver
gray and soft
strange and new
like sleeping animals
very still

# ---------------------------------------------------------------- conflict
@argue
{A} and {B} wanted to go different ways.
"No, this way!" said {A}. "No, that way!" said {B}.
{B} said {A} was too slow, and {A} got angry.
{A} took the last {snack}, and {B} was upset.
They both talked at the same time, and nobody listened.
{B} stomped {B_his} foot. "You never listen to me!"
{A} turned away and did not talk to {B}.

@makeup
{A} walked up to {B}. "I am sorry," {A_he} said.
"I am sorry too," said {B}. They hugged.
{A} and {B} shook hands and smiled again.
They sat down together and talked it over.
{A} shared {A_his} {snack} with {B}, and {B} smiled.
"Friends again?" asked {A}. "Friends again!" said {B}.
"""

# Sentences that carry the plot: the opening, each fact's first mention, reminders, endings and morals.
STRUCTURE_TEXT = r"""
@open
Once upon a time, in a {town_adj} town by {home_near}, there was a {H_kind} named {H}.
There was once a {trait} {H_kind}. {H_His} name was {H}.
In a {town_adj} little town, there lived a {H_kind} named {H}, who was {trait} and {trait2}.
Long ago, near {home_near}, lived a {trait} {H_kind} called {H}.
{H} was a {trait2} little {H_kind} who lived near {home_near}.
Once upon a time, there was a {trait} {H_kind}. Everyone called {H_him} {H}.
Once upon a time, a little {H_kind} named {H} woke up early on a {day_adj} day.
Once upon a time, there was a {trait} {H_kind} named {H}.
Once upon a time, in a little town, there lived a {trait} {H_kind} called {H}.
There once was a {trait} little {H_kind} named {H}.
Once upon a time, a {trait} {H_kind} named {H} lived near {home_near}.
Once there was a {H_kind} named {H}, and {H_he} was very {trait}.
Once upon a time, there was a {H_kind} called {H} who loved {love}.

@hobby_intro
{H} loved {hobby_love}.
More than anything, {H} liked {hobby_love}.
Every day, {H} found time {hobby_love}.
{H}'s favorite thing to do was {hobby_love}.

@travel_bit
They walked on, past {path_sight}.
The {path_kind} went up and down, and they followed it.
{A} and {B} kept walking, {adv}.
They crossed {path_over} and went on.
The {path_kind} turned left, then right, then left again.
{A} walked in front, and {B} and {P} came after.
They went on and on, {adv}, until the {pthing} were behind them.
On and on they went, past {path_sight} and {path_sight}.

@open_more
Every day after lunch, {H} played outside until the sun went down.
{H} had a big smile and a loud laugh.
Everyone in town knew {H} and {H_his} {trait2} heart.
{H} could hop on one foot longer than anyone.
{H} had a small room with a window that looked at {home_near}.
At night, {H} liked to look at the moon before bed.
{H} always said hello to the birds in the morning.
{H} was small, but {H_he} was never afraid to try new things.
{H} was {trait}, and everyone liked {H_him}.
Every morning, {H} woke up with a smile.
{H} liked to help {home_person} at home.
{H} always wanted to go on a real adventure.
{H_He} liked to sing while {H_he} played.

@town_adj
quiet
sunny
busy
small
happy
sleepy
green
windy

@trait2
playful
happy
helpful
kind
brave
curious

@love
to splash in puddles
to build towers of blocks
to count the birds
to watch the clouds
to bake cookies with {home_person}
to read picture books
to dance in the kitchen
to climb trees
to play with {H_his} friends
to look for bugs in the garden
to play outside
stories about dragons
to look at the stars
to run in the rain
to pick flowers
to help {home_person}
to sing songs
to draw pictures

@home_near
the woods
a big hill
a quiet river
the sea
a green meadow
a little farm

@home_intro
{H} lived with {home_person} in a {HC} house with {home_feature2}.
Their house was {HC}, with a {home_feature} and a path of stones.
{H}'s house was the only {HC} house on the street.
Near {home_near} stood a small {HC} house. That was where {H} lived.
{H} lived in a little {HC} house near {home_near}.
{H_His} home was a small {HC} house with a {home_feature}.
{H} and {H_his} family lived in a {HC} house at the end of the road.
The {HC} house where {H} lived had {home_feature2}.

@home_feature
round window
red door
little garden
big tree in front
tall chimney
white fence

@home_feature2
a big garden full of flowers
a swing in the yard
a round window by the door
a cozy room for {H} under the roof

@home
the {HC} house
{H_his} {HC} house
the little {HC} house
home

@pet_intro
{H} had a {pet_adj} pet {PK}. {H} called {P_him} {Pn}.
Every morning, {H} said hello to {H_his} {PK}, {Pn}.
{H} and {H_his} {pet_adj} {PK}, {Pn}, did everything together.
{H} had a little pal with {pet_feet}: a {PK} named {Pn}.
{Pn}, a {pet_adj} {PK}, lived with {H} and always stayed close.
{H} had a {pet_adj} {PK} named {Pn}.
{H_His} pet at home was a {pet_adj} {PK} called {Pn}.
{H} had a pet {PK}, and {P_his} name was {Pn}.
{H} lived with {H_his} {pet_adj} {PK}, {Pn}.

@pet_feet
four little feet
soft fur
big eyes
a funny face
a happy heart

@pet_adj
little
fluffy
playful
happy
funny
small
sweet

@spots_intro
{Pn} was a {PK} with {NUM} white spots.
Everyone knew {Pn} by the {NUM} white spots on {P_his} back.
{H} loved {Pn}'s {NUM} little white spots.
{Pn} had {NUM} white spots on {P_his} back.
On {P_his} back, {Pn} had {NUM} little white spots.
{H} liked to count the {NUM} white spots on {Pn}.

@spots_use
{P} {pet_move}, and {A} could see all {NUM} of {Pn}'s white spots.
{A} smiled at the {NUM} white spots on {Pn}'s back.
"Look, {B}," said {A}. "{Pn} still has {NUM} white spots, even with all this {dirt_kind}!"
The {NUM} white spots on {Pn}'s back were {spot_state} now.
{A} knew {Pn} by the {NUM} white spots on {P_his} back.
{B} counted the white spots on {Pn}. "There are {NUM}," {B_he} said.
{A} saw the {NUM} white spots on {Pn} and smiled.
{A} counted the spots on {Pn}. There were {NUM}, like always.
In the dark, {A} could only see {Pn}'s {NUM} white spots.

@friend_intro
{H} played every day with {F}, a {F_kind} from down the road.
{F} lived in the house next to {H}'s, and they were best friends.
{H}'s best friend was {F}. {F_He} was a {trait2} {F_kind} with a big laugh.
{F}, a {trait2} {F_kind}, was {H}'s best friend in the whole world.
{H}'s best friend was a {F_kind} named {F}.
{F} was {H}'s best friend, and {F_he} lived next door.
Every day, {H} played with {H_his} friend {F}.
{H} had a good friend, a {F_kind} called {F}.

@fav_intro
{H} had a {FC} {fobj}, and {H_he} loved it very much.
The best thing {H} had was a {FC} {fobj} from {home_person}.
{H_He} never went anywhere without {H_his} {FC} {fobj}.
{H} loved {H_his} {FC} {fobj} more than anything.
{H_His} favorite thing in the world was a {FC} {fobj}.
{H} had a {FC} {fobj} that {home_person} gave {H_him}.
{H} took {H_his} {FC} {fobj} everywhere {H_he} went.

@fav_use
{A} took out the {FC} {fobj} and {fav_did}.
The {FC} {fobj} {fav_state}.
{B} asked, "Can I hold your {FC} {fobj}?" and {A} said yes.
{A} made sure the {FC} {fobj} was safe.
With the {FC} {fobj} in {A_his} hands, {A} felt {feel_good}.
{A} held {H_his} {FC} {fobj} close.
{H} was glad {H_he} had brought {H_his} {FC} {fobj}.
{H_His} {FC} {fobj} was still safe with {H_him}.
{H} looked at {H_his} {FC} {fobj} and felt brave.

@quest
the {QC} {qobj}
the {QC} {qobj}
the {qobj}

@goal_intro_lost
When {H} woke up one day, {H_his} {QC} {qobj} was not in its place.
One {day_adj} morning, {H} looked for {H_his} {QC} {qobj}, but it was gone.
{H} had a {QC} {qobj}, but one day {H_he} could not find it anywhere.
One day, {H} could not find {H_his} {QC} {qobj}.
One morning, {H}'s {QC} {qobj} was gone.
But one day, something sad happened: {H} lost {H_his} {QC} {qobj}.

@goal_more_lost
{H} looked in the kitchen, in the yard and under the table. No {QC} {qobj}.
"Have you seen my {QC} {qobj}?" {H} asked {home_person}. But {home_person} had not seen it.
{H} felt sad. The {QC} {qobj} was very special to {H_him}.
"I must find my {qobj}," said {H}. "It is the {QC} one from {home_person}."
{H} looked under the bed and behind the door, but it was not there.
"Where is my {qobj}?" cried {H}. "It is {QC}, and it is my best {qobj}!"
{H} looked everywhere in the house, but the {QC} {qobj} was gone.

@goal_intro_gift
{home_person} had always wanted a {QC} {qobj}. {H} wanted to find one for {home_person}.
One day, {H} heard that a {QC} {qobj} could be found far away. It would be the best gift for {home_person}.
One day, {home_person} was sick in bed. {H} wanted to find a {QC} {qobj} to make {home_person} smile.
{home_person}'s birthday was coming. {H} wanted to give {home_person} a {QC} {qobj}.
{home_person} told {H} a story about a {QC} {qobj} far away. {H} wanted to find it.

@goal_more_gift
{H} told {home_person} that {H_he} was going on a little trip, but did not say why.
"A {QC} {qobj} for {home_person}," {H} said to {H_him}self. "That is my plan."
{H} drew a picture of a {QC} {qobj} so {H_he} would not forget.
"I will find the {QC} {qobj}," said {H}. "It will make {home_person} so happy."
{H} had never seen a {QC} {qobj}, but {H_he} knew it was out there.
{H} packed a bag with {snack} and got ready to go.

@hid_intro_lost
{Pn} liked to hide things {HID}, but nobody knew.
Sometimes {H} saw {Pn} digging {HID}.
{H} once saw {Pn} take something {HID}, but {Pn} did not tell.
Every day, {Pn} went {HID} and came back looking very pleased.
{Pn} had a secret spot {HID}, where {P_he} kept {P_his} best things.

@hid_intro_gift
{home_person} kept a little surprise {HID}, but {H} did not know what it was.
{home_person} had put a secret surprise {HID}. "Not yet," {hp_he} said with a wink.
{H} knew there was something {HID}, but {home_person} said it was a secret.
"Do not look {HID} until you are back," {home_person} told {H} with a smile.

@fail
They looked and looked, but they never found the {QC} {qobj}.
The sun went down, and the {QC} {qobj} was still lost.
At last they had to stop. The {QC} {qobj} was nowhere to be found.

@promise_intro
{H} gave {home_person} a hug and said, "I promise to bring you a {PROM}."
{home_person} smiled when {H} promised to find a {PROM}.
Before {H} left, {H_he} promised {home_person} to bring back a {PROM}.
"I promise I will bring you a {PROM}," {H} said to {home_person}.
{H} made a promise: {H_he} would find a {PROM} for {home_person}.

@promise_use
{A} thought about {A_his} promise. {A_He} still had to find a {PROM}.
"I promised {home_person} a {PROM}," {A} told {B}.
{A} looked near the {pthing} for a {PROM}.
{A} put the {PROM} deep in {A_his} bag, so it would not get lost.
"Do you think {home_person} will like the {PROM}?" asked {A}.
{H} did not forget {H_his} promise to bring back a {PROM}.
{H} found a {PROM} and put it in {H_his} bag for {home_person}.
"I still have to find a {PROM} for {home_person}," said {H}.

@word_intro
{home_person} whispered a secret word to {H}. "The word is {WORD}. Say it when you need to be brave," {hp_he} said.
{home_person} told {H} a secret word for when {H_he} felt scared. The word was {WORD}.

@word_use
{A} was {feel_bad}, so {A_he} said the secret word, {WORD}, very softly.
"It is {WORD}," {H} said under {H_his} breath, and {H_he} felt {feel_good}.
The secret word {WORD} made {H} think of {home_person}.
{H} told {B} the secret word. "It is {WORD}," {H_he} whispered.
{H} said the secret word to {H_him}self, {WORD}, and felt brave again.
{H} whispered the word {WORD}, and {H_his} heart felt strong.
{H} remembered the secret word from {home_person}. "It is {WORD}!" {H_he} said out loud.

@foreshadow
Something about {HID} made {Pn} very happy, but nobody asked why.
{H} did not know that a {nice} new friend was waiting on the way.
The wind was changing, and {home_person} said a storm might come.
{H} did not know it yet, but {H_his} {FC} {fobj} would help {H_him} one day.
Far away, dark clouds were getting ready for a storm.
{H} did not know that this day would be very different.
Nobody knew that {Pn} had a little secret.

@helper_intro
There they met {helper_who} named {G}.
Near {here}, they met {helper_who}. "My name is {G}," {G_he} said.
{helper_who_cap} came to say hello. {G_His} name was {G}.

@helper_use
{A} thought of {G} the {G_kind} and felt {feel_good}.
"{G} said there is always a way," {A} told {B}.
{A} remembered how {G} had helped them at {G_place}.
{A} remembered the words of {G}: "{helper_line}"
"{G} would know what to do," said {B}.
{A} hoped to see {G} again one day.
Maybe {G} the {G_kind} was watching them from far away.
{A} thought of {G} and what {G_he} had said.
"{G} was right," said {A}.
{A} wished {G} could see them now.

@companion_intro
At {here}, they met a {C_kind} named {C}.
A little {C_kind} came up to them. "Hello, I am {C}," {C_he} said.
They made a new friend at {here}: a {C_kind} called {C}.

@companion_more
{C} {companion_act}.
{C} wanted to come with them, so now they were more.
{C} showed them {pthing} that nobody else knew about.
"Thank you, {C}," said {A}.
{C} and {P} became friends at once.

@companion_act
told a funny joke
sang a little song
knew a short way
was very kind
laughed a lot
was a little shy at first

@companion_use
{A} told {B} a funny story about {C} the {C_kind}.
{A} missed {C}, the {C_kind} from {C_place}.
"I wonder what {C} is doing now," said {A}.
{A} hoped {C} was happy at {C_place}.
{A} thought of {C} the {C_kind} and smiled.
"{C} would like this place," said {A}.
{A} remembered {C}, the {C_kind} from {C_place}.

@chapter_end
When the sun went down, they made a little camp and went to sleep.
That night, {A} dreamed of {quest}.
They were tired, but happy.
{A} looked up at the stars and thought of {home}.
They ate {snack} and talked until it got dark.
The day was over, and tomorrow would be a new day.
{P} curled up next to {A} and fell asleep.

@resolve_lost
{H} went straight to {HID}. The {QC} {qobj} was right there!
"Let's look {HID}," said {H}. And there was the {QC} {qobj}, safe and sound.
{H} had an idea and looked {HID}. There it was, the {QC} {qobj}!
At last, {H} looked {HID}. There was the {QC} {qobj}!
{H} ran home and looked {HID}. There it was: the {QC} {qobj}!

@twist_lost
{Pn} had hidden it there all along!
It was {Pn} who had put it there. {Pn} wanted to keep it safe.

@resolve_gift
At the end of the path, the {QC} {qobj} was waiting. {H} held it with care.
{H} saw something {QC} by an old tree. It was the {qobj}!
Under a bush, {H} found a {QC} {qobj}. It was perfect.
At last, {H} found the {QC} {qobj}. It was even prettier than {H} had hoped.
There, on a rock, was the {QC} {qobj}. {H} picked it up with care.

@twist_gift
But when {H} turned the {qobj} over, it was not {QC} at all on the back. It was gold!
But the {qobj} was not just {QC}. When {H} held it up, it sang a soft song!
And then {H} saw a little note inside. It said, "For {home_person}, with love."

@go_home
The {HC} house was a happy sight when they got back.
{H} ran the last bit of the way to the {HC} house.
When they saw the {HC} house, {H} and {F} cheered.
{H} and {F} went back home to the {HC} house.
{H}, {F} and {Pn} walked home to the {HC} house together.
The way home felt short. Soon they saw the {HC} house.

@happy_end
That night, {H} fell asleep with a big smile.
{home_person} said, "I am so proud of you, {H}."
Everyone laughed and talked about the adventure.
It was the best day {H} ever had.
{Pn} slept at the foot of {H}'s bed, and all was well.
{home_person} gave {H} a big hug.
{H} gave {home_person} the {QC} {qobj}, and {home_person} smiled a big smile.
That night, they all had a big dinner and told stories.
{H} was tired, but {H_he} was very happy.
{Pn} wagged and jumped, and everyone laughed.

@promise_end
{H} kept {H_his} promise and gave {home_person} the {PROM}.
And {H} did not forget the {PROM}. {home_person} loved it.

@surprise_end
Then {home_person} went to get the surprise {HID}. It was a cake!
{home_person} had a surprise {HID}: a new book for {H}.

@sad_end
{H} went home with empty hands. It was a sad day.
{H} never saw the {QC} {qobj} again.
{H} was very sad, and {H_he} cried all the way home.
Even {Pn} could not make {H} smile that night.

@moral_bad
The moral of the story is: {moral_bad_text}
{H} learned that {moral_bad_lc}

@moral_bad_text
Take good care of the things you love.
Look after your things, or you may lose them.
Sometimes things do not go the way we want, and that is okay.

@moral_bad_lc
you should take good care of the things you love.
sometimes things go wrong, and it is okay to be sad.
even a sad day ends, and a new day comes.

@moral
The moral of the story is: {moral_text}
{H} learned that {moral_text_lc}
From that day on, {H} knew that {moral_text_lc}

@moral_text
Be kind to everyone you meet.
Help your friends when they need you.
Be patient, and good things will come.
Say sorry when you make a mistake.
Love is the best gift of all.
Good friends help each other.
Never give up, even when things are hard.
Be brave, but be careful too.
It is good to keep your promises.
Sharing makes everyone happy.
Always listen to the people who love you.

@moral_text_lc
you should help your friends when they need you.
it is good to say sorry when you make a mistake.
love is the best gift of all.
you can do hard things if you try.
a good friend is worth more than gold.
good friends help each other.
you should never give up, even when things are hard.
it is good to keep your promises.
sharing makes everyone happy.
being kind is the best thing of all.
the best things are done together.

@short
{A} {smile}.
{B} {smile}.
{P} {pet_move}.
They {walk_verb} on.
The {wind_adj} wind blew.
{A} looked at the {pthing}.
{A} hummed a song.
{B} waited for {A}.
{A} felt {feel_good}.
It was {very} quiet.
{P} {pet_sound}.

@tiny
{A} smiled.
{A} nodded.
{B} laughed.
{Pn} yawned.
{A} waved.
{B} nodded.
{A} giggled.
{B} smiled.
{Pn} jumped.
{A} clapped.
They rested.
They laughed.

@tail_scene
, and {P} {pet_sound}
, as a {small_animal} {small_animal_did}
, just as the {wind_adj} wind blew {wind_where}
, and the sound of {psound} filled the air
, while the sun was {sun_state}
, and {B} looked around
, and nobody made a sound
in the {light}
that {day_part}

@tail_happy
{tail_actor}
, and it felt {very} good
with a {smile_adj} smile
, humming a little song
, and then they both {smile_b}
, feeling {feel_good}
, and {A_his} heart felt {light_heart}

@tail_actor
{tail_scene}
, and nobody said a word

, and {B} did the same
, as {P} watched
, one step at a time
before the sun went down
, and {B} {smile_b}
, and {P} {pet_move}
, while {P} {pet_move}
near the {pthing}
by the {pthing}
under the {colour_sky} sky
with {B} close by
, not far from {B}
as {A_he} thought of {home}
, with {P} right behind {A_him}
at {here}

@day_part
morning
afternoon
evening
day

@small_animal
bird
frog
bee
butterfly
squirrel
mouse
ladybug
duck

@small_animal_did
flew by
hopped past
went by
sang in a tree
looked at them
ran up a tree

@light_heart
light
warm
full
big
happy

@opener_scene
Under the {colour_sky} sky,
As the wind blew,
For a moment,
Still,
In the {light},
While {P} {pet_move},
At the same time,
Not long after,
Right after that,
When the wind stopped,
All at once,
Just then,
Now and then,
That {day_part},
Far away,

@opener_actor
{opener_scene}
Quietly,
Just for fun,
With a little hop,
After a big yawn,
When {A_he} looked up,
Before {B} could say a word,
With {A_his} eyes wide open,
As {P} {pet_move},
In the {light} of the {day_part},
Full of hope,
With a {smile_adj} smile,
Near the {pthing},
With {P} close by,
When {B} was not looking,
After a short rest,
Holding hands with {B},
Far from {home},
Not far from the {pthing},
With a happy heart,
With a small sigh,
Once more,
Without a sound,
Next to {B},
While {B} {smile_b},

@smile_b
smiled
laughed
looked around
hummed
watched
waited
"""

SECTIONS = {**parse_sections(GRAMMAR_TEXT), **parse_sections(STRUCTURE_TEXT)}
