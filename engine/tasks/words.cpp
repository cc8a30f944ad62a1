// The built-in word list of the nih tasks: common concrete English nouns, one or two tokens
// each for a BPE tokenizer, distinct and lower case. Keys of the niah tasks and the words of
// cwe are drawn from it (no download; the list is ours).
#include "engine/tasks/task.h"

namespace infinipot::nih {

const std::vector<std::string>& word_list() {
  static const std::vector<std::string> words = {
    "apple", "anchor", "arrow", "attic", "badge", "bagel", "balloon", "bamboo", "banana", "banner", "barrel",
    "basket", "beacon", "beaver", "bell", "bench", "berry", "bicycle", "blanket", "bottle", "boulder", "bracelet",
    "branch", "bread", "bridge", "broom", "bucket", "buffalo", "button", "cabin", "cactus", "camel", "camera",
    "candle", "canoe", "canyon", "carpet", "carrot", "castle", "cathedral", "cedar", "cellar", "chair", "cherry",
    "chess", "chimney", "circus", "cliff", "clock", "cloud", "coconut", "compass", "copper", "corn", "cottage",
    "cotton", "crayon", "cricket", "crown", "crystal", "cup", "curtain", "daisy", "desert", "diamond", "dolphin",
    "donkey", "dragon", "drum", "eagle", "easel", "elephant", "elm", "engine", "falcon", "feather", "fence", "fern",
    "ferry", "fiddle", "fig", "flag", "flute", "forest", "fossil", "fountain", "fox", "garden", "garlic", "gate",
    "giraffe", "glacier", "glove", "goat", "gondola", "grape", "guitar", "hammer", "harbor", "harp", "hat", "hawk",
    "helmet", "hill", "honey", "horse", "island", "ivory", "jacket", "jaguar", "jar", "jelly", "jungle", "kettle",
    "kite", "koala", "ladder", "lagoon", "lake", "lamp", "lantern", "lemon", "leopard", "lettuce", "lighthouse",
    "lily", "lion", "lizard", "lobster", "locket", "lotus", "magnet", "mango", "maple", "marble", "meadow", "melon",
    "mirror", "mitten", "monkey", "moon", "mountain", "mushroom", "needle", "nest", "notebook", "oak", "oasis",
    "ocean", "olive", "onion", "orange", "orchard", "otter", "owl", "paddle", "palace", "panda", "parrot", "peach",
    "peanut", "pear", "pebble", "pelican", "pencil", "penguin", "pepper", "piano", "pigeon", "pillow", "pine",
    "pirate", "planet", "plum", "pocket", "pond", "poppy", "potato", "pumpkin", "puzzle", "quilt", "rabbit", "radio",
    "raft", "rainbow", "raven", "ribbon", "river", "robin", "rocket", "rose", "ruby", "saddle", "sail", "salmon",
    "sandal", "satchel", "scarf", "scissors", "seal", "shell", "ship", "shovel", "silver", "skate", "sled", "snail",
    "sparrow", "spider", "sponge", "spoon", "squirrel", "stamp", "star", "statue", "stove", "straw", "sugar",
    "summit", "swan", "sword", "table", "teapot", "temple", "tent", "thimble", "thunder", "tiger", "timber", "tomato",
    "torch", "tower", "tractor", "trumpet", "tulip", "tunnel", "turtle", "umbrella", "valley", "vase", "velvet",
    "violin", "volcano", "wagon", "walnut", "walrus", "wand", "whale", "wheat", "whistle", "willow", "window",
    "wizard", "wolf", "yacht", "zebra", "acorn", "almond", "badger", "beetle", "blossom", "bonnet", "cabbage",
    "candy", "canvas", "cargo", "cloak", "clover", "cobra", "coffee", "comet", "coral", "cradle", "crane", "crater",
    "dagger", "dune", "emerald", "ferret", "flannel", "gadget", "garnet", "gecko", "ginger", "goblet", "granite",
    "gravel", "hazel", "hedge", "hermit", "hornet", "husky", "igloo", "jasmine", "jewel", "juniper", "kayak",
    "kernel", "kitten", "ladle", "lavender", "lemur", "linen", "llama", "lynx", "mammoth", "mantis", "marsh",
    "meteor", "mint", "moose", "moth", "mural", "nectar", "noodle", "nutmeg", "orbit", "orchid", "oyster", "paprika",
    "parcel", "pasta", "pastry", "peacock", "pewter", "pickle", "pier", "pilgrim", "pistachio", "plank", "plaza",
    "pony", "prairie", "prism", "quartz", "quiver", "radish", "raisin", "reef", "rhubarb", "saffron", "sapphire",
    "scroll", "shrimp", "sketch", "slipper", "spruce", "stallion", "stump", "sunflower", "tablet", "tambourine",
    "tapestry", "thistle", "tortoise", "trolley", "trout", "tundra", "turnip", "valve", "vessel", "vine", "waffle",
    "wigwam", "wombat", "yarn", "yogurt", "zucchini",
  };
  return words;
}

}  // namespace infinipot::nih
